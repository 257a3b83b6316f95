"""Tensor-parallel decoding on CUDA tensors over NCCL (skipped without GPUs).

The same code as the CPU path: with one GPU a 1-rank NCCL group runs the sharded
engine on the GPU; with two or more, two ranks split it. Either way the greedy
tokens must equal one process's on the CPU (float64, so no argmax can differ).
"""

import pytest
import torch

from clusterlab.serving_cluster.measure import prompts_of, reference_outputs
from clusterlab.serving_cluster.ranks import allreduce_sweep_worker, tp_decode_worker

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = pytest.mark.skipif(GPUS == 0, reason="needs a CUDA GPU")


def test_tp_decoding_on_gpus_equals_one_process():
    import clusterlab as cl

    world = 2 if GPUS >= 2 else 1
    prompts = prompts_of(3, 2, 30, seed=7)
    ranks = cl.launch(tp_decode_worker, world, backend="nccl", timeout=120,
                      prompts=prompts, new_tokens=8)  # fmt: skip
    ok, text = cl.serving_cluster.check.tp_equals_one_process(
        ranks, reference_outputs(prompts, 8)
    )
    assert ok, text


def test_the_decoding_allreduce_is_timed_on_gpus():
    import clusterlab as cl

    world = 2 if GPUS >= 2 else 1
    rows = cl.launch(allreduce_sweep_worker, world, backend="nccl", timeout=120,
                     sizes_bytes=[2048, 131072], repeats=5)[0]  # fmt: skip
    assert [r[0] for r in rows] == [2048, 131072]
    assert all(r[1] > 0 for r in rows)
