"""Ring attention and Ulysses on real gloo ranks equal one process's attention.

One launch per world size runs every case (a launch costs more than these
small attentions): ring attention causal and not, contiguous and zig-zag
shards; Ulysses where the world size divides the heads, and its ValueError
where it does not. Outputs and the gradients of q, k and v are compared in
float64 with one process's ``scaled_dot_product_attention``.
"""

import pytest
import torch

import clusterlab as cl
from clusterlab.long_context.ranks import ulysses_attention
from clusterlab.long_context.workers import (
    context_attention_worker,
    reference_attention,
    saved_bytes_worker,
)

pytestmark = [pytest.mark.dist]

SHAPE = dict(batch=2, heads=4, seq=24, head_dim=8, seed=5)
RING = [
    dict(method="ring", causal=causal, layout=layout)
    for causal in (False, True)
    for layout in ("contiguous", "zigzag")
]
ULYSSES = [dict(method="ulysses", causal=causal) for causal in (False, True)]


def _all_cases(rank, world_size, **shape):
    divides = shape["heads"] % world_size == 0
    cases = RING + (ULYSSES if divides else [])
    out = dict(cases=context_attention_worker(rank, world_size, cases, **shape))
    out["saved_bytes"] = saved_bytes_worker(rank, world_size, **shape)
    if not divides:
        q = torch.zeros(1, shape["heads"], 2, 4)
        try:
            ulysses_attention(q, q, q)
        except ValueError as err:
            out["ulysses_error"] = str(err)
    return out


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_ring_and_ulysses_equal_full_attention(world_size):
    res = cl.launch(_all_cases, world_size, timeout=60, **SHAPE)
    refs = {c: reference_attention(**SHAPE, causal=c) for c in (False, True)}
    n_cases = len(res[0]["cases"])
    assert n_cases == len(RING) + (2 if SHAPE["heads"] % world_size == 0 else 0)
    for i in range(n_cases):
        case = res[0]["cases"][i]["case"]
        shards = [r["cases"][i] for r in res]
        layout = case.get("layout", "contiguous")
        cl.long_context.check.attention_matches_full(
            shards, refs[case["causal"]], layout, 1e-10
        )
        if case["method"] == "ring":
            kv_hidden = SHAPE["heads"] * SHAPE["head_dim"]
            stats = [s["stats"] for s in shards]
            cl.long_context.check.ring_bytes_match_model(
                stats, SHAPE["batch"], SHAPE["seq"], kv_hidden, 8
            )
    by_case = {
        (c["case"]["causal"], c["case"].get("layout")): i
        for i, c in enumerate(res[0]["cases"])
    }
    scores = {
        layout: [r["cases"][by_case[(True, layout)]]["stats"]["scores"] for r in res]
        for layout in ("contiguous", "zigzag")
    }
    cl.long_context.check.zigzag_balances_work(scores["contiguous"], scores["zigzag"])
    # Contiguous causal shards: rank r computes r + 1 blocks (its own diagonal).
    blocks = [r["cases"][by_case[(True, "contiguous")]]["stats"]["blocks"] for r in res]
    assert blocks == list(range(1, world_size + 1))
    # Zig-zag: every rank computes 2W + 1 chunk products (a chunk: half a shard).
    zz = [r["cases"][by_case[(True, "zigzag")]]["stats"]["blocks"] for r in res]
    assert zz == [2 * world_size + 1] * world_size
    saved = {world_size: res[0]["saved_bytes"]}
    assert len({r["saved_bytes"] for r in res}) == 1
    cl.long_context.check.saved_bytes_match_model(
        saved, SHAPE["seq"], 32, SHAPE["heads"], 8, SHAPE["batch"]
    )
    if SHAPE["heads"] % world_size:
        assert "q.shape[1]=4" in res[0]["ulysses_error"]
        assert f"world size {world_size}" in res[0]["ulysses_error"]


def _two_pairs(rank, world_size):
    import torch.distributed as dist

    from clusterlab.long_context.ranks import ring_attention
    from clusterlab.long_context.workers import make_qkv

    groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    q, k, v, dout = make_qkv(1, 2, 8, 4, seed=rank // 2)
    mine = slice((rank % 2) * 4, (rank % 2) * 4 + 4)
    out = {}
    for name, fn in (("ring", ring_attention), ("ulysses", ulysses_attention)):
        qs, ks, vs = (t[:, :, mine].clone().requires_grad_() for t in (q, k, v))
        o = fn(qs, ks, vs, True, groups[rank // 2])
        (o * dout[:, :, mine]).sum().backward()
        out[name] = dict(out=o.detach(), dq=qs.grad, dk=ks.grad, dv=vs.grad)
    return out


def test_each_subgroup_attends_over_its_own_sequence():
    res = cl.launch(_two_pairs, 4, timeout=60)
    for pair in (0, 1):
        ref = reference_attention(1, 2, 8, 4, True, seed=pair)
        for name in ("ring", "ulysses"):
            shards = [res[2 * pair + i][name] for i in (0, 1)]
            cl.long_context.check.attention_matches_full(shards, ref, atol=1e-10)
