"""Every lab's exercise, once: its folded answer and its reference solution pass
its check, its stub is "not attempted", and a wrong answer fails with its hint.

The folded answer is the code the course kit's student edition removes and its
instructor edition fills in, so it and ``cl.<topic>.answer`` cannot drift apart.
Some checks run their answer on real ranks, hence this folder.
"""

from __future__ import annotations

import importlib
import math
import re
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
import torch
import torch.distributed as dist

import clusterlab as cl
from check_helpers import check_triad
from clusterlab.course import editions

LABS = sorted((Path(__file__).resolve().parents[2] / "labs").glob("[0-9][0-9]_*.ipynb"))
CALL = r"\bcl\.([a-z_]+)\.(check\w*)\.(\w+)\({name}\b"
# A stub whose reference solution has another name.
SOLUTION_NAMES = {"diagnose": "diagnose_hung_job"}
# Names a lab defines before its exercise and its folded answer uses, as the lab
# defines them.
LAB_NAMES = {
    "06_interconnects": lambda: dict(
        ic=cl.models.interconnects,
        peak_flops=cl.models.interconnects.h100_peak_flops(),
        mfu=cl.models.interconnects.default_mfu(),
    ),
    "23_economics": lambda: dict(econ=cl.models.economics),
}


def exercises():
    """(lab, stub name, check, folded answer's code) for every lab exercise."""
    found = []
    for lab in LABS:
        nb = nbformat.read(lab, as_version=4)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            for name in editions.stub_names(cell.source):
                m = re.search(CALL.format(name=name), cell.source)
                later = [
                    c.source for c in nb.cells[i + 1 :] if c.cell_type == "markdown"
                ]
                folded = editions._answer_code(name, later[:3])
                found.append((lab.stem, name, m and m.groups(), folded))
    return found


EXERCISES = exercises()

#: A wrong answer for every exercise, and text of the hint its check must give.
WRONG = {
    "reduce_then_broadcast": (
        "def reduce_then_broadcast(tensor, rank, world_size):\n"
        "    dist.reduce(tensor, dst=0)\n",
        "from dist.send and dist.recv alone",
    ),
    "vector_happened_before": (
        "def vector_happened_before(u, v):\n"
        "    return all(a <= b for a, b in zip(u, v))\n",
        "an event does not happen before itself",
    ),
    "mean_detection_time": (
        "def mean_detection_time(timeout_s, interval_s, mean_delay_s):\n"
        "    return timeout_s\n",
        "Hint: add up",
    ),
    "busbw_from_algbw": (
        "def busbw_from_algbw(op, algbw_Bps, world_size):\n    return algbw_Bps\n",
        "a reduce-scatter then an all-gather",
    ),
    "ring_allgather": (
        "def ring_allgather(chunks, rank, world_size):\n    return chunks\n",
        "but the sum is",
    ),
    "ports_needed": (
        "def ports_needed(n_params, tokens_per_gpu, network, max_share=0.1):\n"
        "    return 1\n",
        "the exposed share is",
    ),
    "matmul_intensity": (
        "def matmul_intensity(m, n, k, bytes_per_element):\n"
        "    return m * n * k / bytes_per_element\n",
        "bytes are (m·k + k·n + m·n) elements",
    ),
    "average_gradients": (
        "def average_gradients(model, world_size):\n"
        "    for p in model.parameters():\n"
        "        dist.all_reduce(p.grad)\n",
        "divide by world_size",
    ),
    "OverlappedDDP": (
        "class OverlappedDDP(cl.data_parallel.answer.OverlappedDDP):\n"
        "    def finish_gradient_synchronization(self):\n"
        "        self.world_size = 1  # forgets to divide\n"
        "        super().finish_gradient_synchronization()\n",
        "divide by the world size",
    ),
    "ShardedOptimizer": (
        "class ShardedOptimizer(cl.data_parallel.answer.ShardedOptimizer):\n"
        "    def step(self, closure=None):\n"
        "        self.local.step()  # no broadcast\n",
        "broadcast each parameter",
    ),
    "fsdp_bytes_per_rank": (
        "def fsdp_bytes_per_rank(n_params, world_size, zero_stage):\n"
        "    return 16 * n_params\n",
        "the sharded parts are divided by world_size",
    ),
    "row_parallel_forward": (
        "def row_parallel_forward(x_local, weight_local, bias):\n"
        "    return x_local @ weight_local.T + bias\n",
        "add the ranks' partial products",
    ),
    "min_microbatches": (
        "def min_microbatches(stages, max_bubble):\n    return stages\n",
        "then round up",
    ),
    "choose_schedule": (
        "def choose_schedule(stages, max_microbatches, max_held, max_interleave):\n"
        "    return ('1f1b', 1, max_microbatches)\n",
        "the smallest (p - 1) / (v m + p - 1)",
    ),
    "dropped_copies": (
        "def dropped_copies(expert_ids, n_experts, capacity):\n    return 0\n",
        "beyond its capacity",
    ),
    "merge_partial_attention": (
        "def merge_partial_attention(out_a, lse_a, out_b, lse_b):\n"
        "    return (out_a + out_b) / 2, torch.maximum(lse_a, lse_b)\n",
        "a plain average ignores",
    ),
    "per_tensor_scale": (
        "def per_tensor_scale(t, fmt):\n    return 1.0\n",
        "the format's largest value",
    ),
    "state_bytes_per_gpu": (
        "def state_bytes_per_gpu(dense_params, expert_params, *, tp, pp, dp, ep,"
        " zero_stage):\n    return 16 * (dense_params + expert_params)\n",
        "but the answer is",
    ),
    "expected_max_of_n": (
        "def expected_max_of_n(cdf, n, lo_s, hi_s):\n    return (lo_s + hi_s) / 2\n",
        "that is the mean of a single worker",
    ),
    "checkpoint_waste": (
        "def checkpoint_waste(interval_s, checkpoint_cost_s, mtbf_s):\n"
        "    return checkpoint_cost_s / interval_s\n",
        "Hint: waste =",
    ),
    "samples_for": (
        "def samples_for(step, quorum_rank, quorum_size, batches_committed, batch):\n"
        "    first = (step * quorum_size + quorum_rank) * batch\n"
        "    return list(range(first, first + batch))\n",
        "start from batches_committed",
    ),
    "diagnose": (
        "def diagnose(groups, timings):\n    return (0, 'data_loader')\n",
        "look for the rank whose stack differs",
    ),
    "blocks_held": (
        "def blocks_held(prompt_len, steps, block_size):\n"
        "    return -(-(prompt_len + steps) // block_size)\n",
        "the newest token is not cached until the next step",
    ),
    "commit_index": (
        "def commit_index(match_index):\n    return max(match_index)\n",
        "sort the indices from high to low",
    ),
    "price_for_breakeven": (
        "def price_for_breakeven(target_u, **onprem):\n    return 1.0\n",
        "the owned cost per useful hour",
    ),
    "cheaper_on_gpu": (
        "def cheaper_on_gpu(speedup, gpu_price, cpu_price):\n"
        "    return gpu_price < cpu_price\n",
        "compare gpu_price / speedup with cpu_price",
    ),
    "kv_bytes_shipped": (
        "def kv_bytes_shipped(n_layers, n_kv_heads, head_dim, prompt_tokens,"
        " bytes_per_value):\n"
        "    return n_layers * n_kv_heads * head_dim * prompt_tokens"
        " * bytes_per_value\n",
        "Count keys and values",
    ),
}


def _define(code: str, name: str, lab: str = ""):
    """Run an answer's code as a lab cell would, and return the function it defines."""
    namespace = dict(cl=cl, torch=torch, dist=dist, np=np, pd=pd, math=math)
    namespace.update(LAB_NAMES.get(lab, dict)())
    exec(compile(code, f"<{name}>", "exec"), namespace)
    return namespace[name]


def _check(found):
    topic, module, check = found
    return getattr(importlib.import_module(f"clusterlab.{topic}.{module}"), check)


def _solution(topic: str, name: str):
    answers = importlib.import_module(f"clusterlab.{topic}.answer")
    return getattr(answers, SOLUTION_NAMES.get(name, name))


def test_every_lab_has_an_exercise_with_a_check_and_a_folded_answer():
    assert {lab for lab, *_ in EXERCISES} == {lab.stem for lab in LABS}
    for lab, name, found, folded in EXERCISES:
        assert found, f"{lab}: {name} is not passed to a cl.<topic>.check"
        assert folded, f"{lab}: {name} has no folded answer"
    assert {name for _, name, *_ in EXERCISES} == set(WRONG)


@pytest.mark.parametrize(
    "lab, name, found, folded", EXERCISES, ids=[f"{e[0]}-{e[1]}" for e in EXERCISES]
)
def test_the_folded_answer_passes_and_the_check_keeps_its_triad(
    lab, name, found, folded, capsys
):
    check = _check(found)
    wrong, hint = WRONG[name]
    right = _define(folded, name, lab)
    check_triad(check, right, _define(wrong, name, lab), hint, capsys)
    topic = (
        found[0]
        if found[0] != "data_parallel" or name != "fsdp_bytes_per_rank"
        else "data_parallel"
    )
    assert check(_solution(topic, name)) is not False


def test_a_folded_answer_that_drifted_is_caught():
    """The triad fails when the 'right' answer is wrong: the helper can fail."""
    lab, name, found, folded = next(e for e in EXERCISES if e[1] == "cheaper_on_gpu")
    wrong, hint = WRONG[name]
    with pytest.raises(AssertionError):
        check_triad(_check(found), _define(wrong, name), _define(wrong, name), hint)
