"""The NCCL path of the lab kit, on machines with CUDA GPUs (skipped elsewhere).

NCCL needs one GPU per rank, so with one GPU these tests run a 1-rank NCCL group
and check that larger groups fall back to gloo; with two or more they run a real
multi-GPU all-reduce and benchmark.
"""

import pytest
import torch

import clusterlab as cl

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = pytest.mark.skipif(GPUS == 0, reason="needs a CUDA GPU")


def _allreduce_on_gpu(rank, world_size):
    import torch.distributed as dist

    x = torch.full((1024,), float(rank + 1), device="cuda")
    dist.all_reduce(x)
    return {"backend": dist.get_backend(), "value": x[0].item(), "tensor": x[:4]}


def test_nccl_all_reduce_on_every_visible_gpu():
    n = min(GPUS, 8)
    out = cl.launch(_allreduce_on_gpu, n, backend="nccl")
    assert all(r["backend"] == "nccl" for r in out)
    assert all(r["value"] == n * (n + 1) / 2 for r in out)
    assert all(
        r["tensor"].device.type == "cpu" for r in out
    )  # results come back on CPU


def test_more_ranks_than_gpus_fall_back_to_gloo():
    with pytest.warns(UserWarning, match="NCCL needs one GPU per rank"):
        assert cl.core.backend.choose_backend(GPUS + 1) == "gloo"


def test_bench_collective_times_nccl():
    n = min(GPUS, 8)
    df = cl.core.bench.bench_collective("all_reduce", [2**10, 2**24], n, backend="nccl")
    assert (df["backend"] == "nccl").all() and (df["time_s"] > 0).all()
