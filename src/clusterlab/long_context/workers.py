"""Workers for the long-context lab and its tests: attention on sharded ranks.

Every rank builds the same whole ``q, k, v`` and output gradient from a seed,
keeps its shard, runs :func:`~clusterlab.long_context.ranks.ring_attention`
or :func:`~clusterlab.long_context.ranks.ulysses_attention` forward and
backward, and returns its shard of the output and of the gradients, with the
ring's counts. :func:`reference_attention` computes the same on one process
with ``scaled_dot_product_attention``; :func:`gather_shards` puts the ranks'
shards back in sequence order. Several cases run in one launch, because a
launch costs more than these small attentions.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from clusterlab.core.counting import count_collectives
from clusterlab.long_context.ranks import (
    ring_attention,
    ulysses_attention,
    zigzag_shard,
    zigzag_unshard,
)

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def make_qkv(batch, heads, seq, head_dim, seed=0, dtype="float64"):
    """Whole-sequence ``q, k, v`` and an output gradient, the same on every rank."""
    gen = torch.Generator().manual_seed(seed)
    shape = (batch, heads, seq, head_dim)
    return [torch.randn(shape, generator=gen, dtype=_DTYPES[dtype]) for _ in range(4)]


def _backward(out, dout):
    # The same gradients as out.backward(dout), without the costly import
    # (sympy, several seconds) that backward with a gradient argument triggers.
    (out * dout).sum().backward()


def reference_attention(batch, heads, seq, head_dim, causal, seed=0, dtype="float64"):
    """One process's attention over the whole sequence: output and gradients.

    Returns:
        dict of whole-sequence tensors ``out, dq, dk, dv``.
    """
    q, k, v, dout = make_qkv(batch, heads, seq, head_dim, seed, dtype)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    _backward(out, dout)
    return dict(out=out.detach(), dq=q.grad, dk=k.grad, dv=v.grad)


def _device(rank):
    """This rank's GPU under NCCL, else the CPU."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", rank % torch.cuda.device_count())
    return torch.device("cpu")


def _shard(x, rank, world_size, layout):
    if layout == "zigzag":
        x = zigzag_shard(x, rank, world_size)
    else:
        x = x.chunk(world_size, dim=2)[rank]
    return x.to(_device(rank))


def gather_shards(shards, layout="contiguous"):
    """The whole sequence from the ranks' shards (index = rank)."""
    if layout == "zigzag":
        return zigzag_unshard(shards)
    return torch.cat(list(shards), dim=2)


def context_attention_worker(
    rank, world_size, cases, batch, heads, seq, head_dim, seed=0, dtype="float64"
):
    """Run each case on this rank; return its shards of output and gradients.

    Args:
        rank, world_size: as ``cl.launch`` passes them.
        cases: dicts with ``method`` ("ring" or "ulysses"), ``causal`` and, for
            the ring, ``layout``.
        batch, heads, seq, head_dim: the whole attention's shape.
        seed, dtype: for :func:`make_qkv`.

    Returns:
        One dict per case: the case, ``out, dq, dk, dv`` (this rank's shards),
        the ring's ``stats`` (what it counted itself), ``sent`` (bytes handed
        to c10d's send and all-to-all operators in the ``"forward"`` and
        ``"backward"`` passes, counted below ``torch.distributed`` by
        ``cl.core.counting.count_collectives``) and ``elapsed_s``
        (forward and backward, the counting included).
    """
    full = make_qkv(batch, heads, seq, head_dim, seed, dtype)
    results = []
    for case in cases:
        layout = case.get("layout", "contiguous")
        q, k, v, dout = (_shard(t, rank, world_size, layout) for t in full)
        q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
        stats = {}
        if q.is_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        with count_collectives() as counted:  # below torch.distributed
            if case["method"] == "ring":
                out = ring_attention(
                    q, k, v, case["causal"], layout=layout, stats=stats
                )
            else:
                out = ulysses_attention(q, k, v, case["causal"])
            _backward(out, dout)
        if q.is_cuda:
            torch.cuda.synchronize()
        elapsed_s = time.perf_counter() - start
        sent = {
            phase: sum(r["bytes"] for r in counted.records
                       if r["op"] in ("send", "all_to_all") and r["phase"] == phase)
            for phase in ("forward", "backward")
        }  # fmt: skip
        results.append(
            dict(
                case=dict(case),
                out=out.detach().cpu(),
                dq=q.grad.cpu(),
                dk=k.grad.cpu(),
                dv=v.grad.cpu(),
                stats=stats,
                sent=sent,
                elapsed_s=elapsed_s,
            )
        )
    return results


def saved_bytes_worker(
    rank, world_size, batch, heads, seq, head_dim, seed=0, dtype="float64"
):
    """Bytes this rank's ring attention keeps for backward (causal, zig-zag).

    Counted with ``torch.autograd.graph.saved_tensors_hooks``: every tensor
    autograd saves passes through the hook once.

    Returns:
        Bytes of the tensors saved for the backward pass on this rank.
    """
    q, k, v, _ = (
        _shard(t, rank, world_size, "zigzag")
        for t in make_qkv(batch, heads, seq, head_dim, seed, dtype)
    )
    q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
    kept = []

    def pack(t):
        kept.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        ring_attention(q, k, v, causal=True, layout="zigzag")
    return sum(kept)


def balance_timing_worker(
    rank, world_size, heads=8, seq=2048, head_dim=64, repeats=3, seed=0
):
    """Each layout's causal ring-attention forward, timed on this rank.

    Large enough blocks that the arithmetic, not the per-block overhead, sets
    the time; forward only (the backward repeats the same blocks). Each layout
    runs ``repeats`` times and keeps this rank's fastest ``stats["compute_s"]``
    (its thread's CPU seconds in the block products).

    Returns:
        ``{"contiguous": {"compute_s", "scores"}, "zigzag": {...}}``.
    """
    torch.set_num_threads(1)  # one core's worth per rank, as on a busy machine
    full = make_qkv(1, heads, seq, head_dim, seed, "float32")
    out = {}
    for layout in ("contiguous", "zigzag"):
        q, k, v, _ = (_shard(t, rank, world_size, layout) for t in full)
        best, stats = float("inf"), {}
        for _ in range(repeats):
            stats = {}
            with torch.no_grad():
                ring_attention(q, k, v, True, layout=layout, stats=stats)
            best = min(best, stats["compute_s"])
        out[layout] = {"compute_s": best, "scores": stats["scores"]}
    return out


__all__ = [
    "balance_timing_worker",
    "context_attention_worker",
    "gather_shards",
    "make_qkv",
    "reference_attention",
    "saved_bytes_worker",
]
