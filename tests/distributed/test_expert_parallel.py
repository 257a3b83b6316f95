"""Expert parallelism on real ranks equals the MoE layer in one process.

One launch per world size runs every case: uneven tokens per rank (a rank with
none among them), top-1 and top-2, experts no token picks, a capacity that
drops copies, and arguments that must be refused.
"""

import pytest
import torch

import clusterlab as cl
from clusterlab.experts.layer import route
from clusterlab.experts.ranks import dispatch
from clusterlab.experts.workers import compare, ep_worker, make_case

pytestmark = [pytest.mark.dist]

TOKENS = {2: ([4, 9], [0, 5], [9, 6]), 3: ([5, 0, 7], [6, 2, 1], [9, 4, 7])}
TOKENS[4] = ([5, 0, 7, 3], [6, 2, 1, 8], [9, 4, 7, 5])


def _cases(world_size):
    a, b, c = TOKENS[world_size]
    e = 2 * world_size
    return [
        make_case(a, e, 1, seed=1, unused_experts=(1,)),
        make_case(b, 2 * e, 2, seed=2, unused_experts=(0, 3)),
        make_case(c, e, 2, seed=3, capacity=2),
    ]


def _refusals(world_size):
    """Bad arguments, each with the text its ValueError must contain."""
    x, ids = torch.zeros(4, 3), torch.zeros(4, 2, dtype=torch.long)
    return [
        ((x, ids, 2 * world_size + 1), "n_experts="),
        (
            (x, ids + 2 * world_size, 2 * world_size),
            f"allowed [0, {2 * world_size - 1}]",
        ),
        ((x, -1 - ids, 2 * world_size), "expert_ids holds -1"),
        ((x[0], ids, 2 * world_size), "tokens="),
        ((x, ids[:3], 2 * world_size), "expert_ids.shape=(3, 2)"),
        ((x, ids.float(), 2 * world_size), "expert_ids.dtype="),
    ]


def _worker(rank, world_size, cases):
    results = ep_worker(rank, world_size, cases)
    refused = []
    for args, _ in _refusals(world_size):
        try:
            dispatch(*args)
            refused.append(None)
        except ValueError as err:
            refused.append(str(err))
    return {"cases": results, "refused": refused}


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_dispatch_and_combine_equal_one_process(world_size):
    cases = _cases(world_size)
    res = cl.launch(_worker, world_size, timeout=30, cases=cases)
    for i, case in enumerate(cases):
        per_rank = [r["cases"][i] for r in res]
        diff = compare(per_rank, case)
        assert diff["ok"], (world_size, i, diff)
        # Each rank holds E / W experts; an expert no token picks gets no rows.
        rows = [n for r in per_rank for n in r["expert_rows"]]
        assert len(rows) == case["n_experts"]
        _, ids = route(case["logits"], case["top_k"])
        kept = sum(case["tokens_per_rank"]) * case["top_k"] - sum(
            r["dropped"] for r in per_rank
        )
        assert sum(rows) == kept
        for e in range(case["n_experts"]):
            if not (ids == e).any():
                assert rows[e] == 0
    # The capacity case drops exactly the copies beyond 2 per expert, per rank.
    case, start = cases[2], 0
    _, ids = route(case["logits"], case["top_k"])
    for rank, t in enumerate(case["tokens_per_rank"]):
        want = cl.experts.answer.dropped_copies(
            ids[start : start + t], case["n_experts"], 2
        )
        assert res[rank]["cases"][2]["dropped"] == want
        start += t
    assert sum(r["cases"][2]["dropped"] for r in res) > 0
    for r in res:
        for msg, (_, text) in zip(r["refused"], _refusals(world_size), strict=True):
            assert msg is not None and text in msg, (msg, text)
