"""Context parallelism: attention over a sequence split across ranks.

Each of the ``W`` ranks holds a shard of the sequence: its queries, keys and
values ``[batch, heads, seq_local, head_dim]``. Two ways to attend over all of
it:

* :func:`ring_attention` (Liu et al. 2023): the key and value blocks travel
  round a ring by send/recv; at each of ``W`` steps a rank attends its queries
  over the block in hand (while the next block is on its way) and merges the
  result with the online softmax (:mod:`clusterlab.long_context.blocks`). The
  backward pass sends the blocks round again, with the dK, dV accumulators
  following them home.
* :func:`ulysses_attention` (Jacobs et al. 2023): an all-to-all turns the
  sequence split into a head split, each rank runs ordinary attention over the
  whole sequence for ``heads / W`` heads, and a second all-to-all turns it back.

Causal attention on contiguous shards gives rank ``W-1`` ``W`` blocks of work
and rank 0 one (Brandon et al. 2023 measure this and stripe the positions
round-robin instead). The **zig-zag** layout (``layout="zigzag"``, the one
Llama 3 used; Dubey et al. 2024) cuts the sequence into ``2W`` chunks and
gives rank ``r`` chunks ``r`` and ``2W-1-r``, so every rank has the same
work; :func:`zigzag_shard` and :func:`zigzag_unshard` move between layouts.
Pass ``stats={}`` to count the block products and the bytes sent.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from clusterlab.core.validate import check_choice, check_int
from clusterlab.long_context.blocks import (
    block_attention_backward,
    block_attention_forward,
    block_pairs,
    merge_partial_attention,
)

LAYOUTS = ("contiguous", "zigzag")


def chunk_ids(rank: int, world_size: int, layout: str = "contiguous") -> list[int]:
    """Global chunk numbers a rank holds: ``[rank]``, or ``[r, 2W-1-r]`` zig-zag."""
    w = check_int("world_size", world_size, 1)
    r = check_int("rank", rank, 0, w - 1)
    layout = check_choice("layout", layout, LAYOUTS)
    return [r] if layout == "contiguous" else [r, 2 * w - 1 - r]


def zigzag_shard(x: torch.Tensor, rank: int, world_size: int, dim: int = 2):
    """This rank's zig-zag shard of a whole sequence: chunks ``r`` and ``2W-1-r``.

    Args:
        x: the whole sequence; ``x.shape[dim]`` divisible by ``2 * world_size``.
        rank, world_size: this rank and the number of ranks.
        dim: the sequence dimension.

    Returns:
        The two chunks concatenated along ``dim``.
    """
    w = check_int("world_size", world_size, 1)
    if x.shape[dim] % (2 * w):
        raise ValueError(
            f"x.shape[{dim}]={x.shape[dim]} must be divisible by 2 * world_size "
            f"= {2 * w} for the zig-zag layout"
        )
    chunks = x.chunk(2 * w, dim=dim)
    return torch.cat([chunks[c] for c in chunk_ids(rank, w, "zigzag")], dim=dim)


def zigzag_unshard(shards, dim: int = 2) -> torch.Tensor:
    """The whole sequence from every rank's zig-zag shard (index = rank)."""
    w = len(shards)
    if w < 1:
        raise ValueError("shards=[] must hold one shard per rank (>= 1)")
    chunks = [None] * (2 * w)
    for r, shard in enumerate(shards):
        first, second = shard.chunk(2, dim=dim)
        chunks[r], chunks[2 * w - 1 - r] = first, second
    return torch.cat(chunks, dim=dim)


def _check_qkv(q, k, v, layout):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(
                f"{name} has shape {got}: it must be a 4-D tensor "
                "[batch, heads, seq_local, head_dim]"
            )
    for name, t in (("k", k), ("v", v)):
        if t.shape != q.shape:
            raise ValueError(
                f"{name}.shape={tuple(t.shape)} must equal q.shape="
                f"{tuple(q.shape)} (the same batch, heads, shard length, head_dim)"
            )
    if q.shape[2] < 1:
        raise ValueError("q.shape[2]=0: a shard needs at least one position")
    if layout == "zigzag" and q.shape[2] % 2:
        raise ValueError(
            f"q.shape[2]={q.shape[2]} must be even with layout='zigzag' "
            "(a shard is two chunks of equal length)"
        )


def _ring(group):
    rank, w = dist.get_rank(group), dist.get_world_size(group)
    right, left = (rank + 1) % w, (rank - 1) % w
    if group is not None:
        right, left = (
            dist.get_global_rank(group, right),
            dist.get_global_rank(group, left),
        )
    return rank, w, right, left


def _exchange(tensors, right, left, group):
    """Post sends of ``tensors`` right and receives of as many from the left."""
    bufs = [torch.empty_like(t) for t in tensors]
    ops = [dist.P2POp(dist.isend, t.contiguous(), right, group) for t in tensors]
    ops += [dist.P2POp(dist.irecv, b, left, group) for b in bufs]
    return bufs, dist.batch_isend_irecv(ops)


def _wait(reqs):
    for req in reqs:
        req.wait()


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, group, layout, stats):
        rank, w, right, left = _ring(group)
        n_chunks = 1 if layout == "contiguous" else 2
        qs = q.chunk(n_chunks, dim=2)
        q_ids = chunk_ids(rank, w, layout)
        scale = q.shape[-1] ** -0.5
        outs = [torch.zeros_like(c) for c in qs]
        lses = [
            torch.full(c.shape[:-1], float("-inf"), dtype=q.dtype, device=q.device)
            for c in qs
        ]
        kv, src, sent, blocks, scores = (k, v), rank, 0, 0, 0
        busy = 0.0  # this thread's CPU seconds in block products: waits excluded
        for step in range(w):
            if step < w - 1:  # the next block travels while this one is used
                nxt, reqs = _exchange(kv, right, left, group)
                sent += sum(t.numel() * t.element_size() for t in kv)
            ks, vs = kv[0].chunk(n_chunks, dim=2), kv[1].chunk(n_chunks, dim=2)
            t0 = time.thread_time()
            for i, j, diag in block_pairs(q_ids, chunk_ids(src, w, layout), causal):
                o_b, lse_b = block_attention_forward(qs[i], ks[j], vs[j], scale, diag)
                outs[i], lses[i] = merge_partial_attention(outs[i], lses[i], o_b, lse_b)
                blocks, scores = blocks + 1, scores + qs[i].shape[2] * ks[j].shape[2]
            busy += time.thread_time() - t0
            if step < w - 1:
                _wait(reqs)
                kv, src = tuple(nxt), (src - 1) % w
        out, lse = torch.cat(outs, dim=2), torch.cat(lses, dim=2)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.setup = (causal, group, layout, stats)
        if stats is not None:
            stats.update(blocks=blocks, scores=scores, forward_bytes=sent,
                         compute_s=busy)  # fmt: skip
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        causal, group, layout, stats = ctx.setup
        rank, w, right, left = _ring(group)
        n_chunks = 1 if layout == "contiguous" else 2
        dout = dout.contiguous()
        delta = (dout * out).sum(-1)
        split = lambda t: t.chunk(n_chunks, dim=2)  # noqa: E731
        qs, dos, lses, deltas = split(q), split(dout), split(lse), split(delta)
        q_ids = chunk_ids(rank, w, layout)
        scale = q.shape[-1] ** -0.5
        dqs = [torch.zeros_like(c) for c in qs]
        # dK, dV accumulators travel with their block and end at its owner.
        kv, acc, src, sent = (k, v), [torch.zeros_like(k), torch.zeros_like(v)], rank, 0
        for step in range(w):
            if step < w - 1:
                nxt, reqs = _exchange(kv, right, left, group)
                sent += sum(t.numel() * t.element_size() for t in kv)
            ks, vs = split(kv[0]), split(kv[1])
            dks, dvs = list(split(acc[0])), list(split(acc[1]))
            for i, j, diag in block_pairs(q_ids, chunk_ids(src, w, layout), causal):
                dq, dk, dv = block_attention_backward(
                    qs[i], ks[j], vs[j], dos[i], lses[i], deltas[i], scale, diag
                )
                dqs[i] = dqs[i] + dq
                dks[j], dvs[j] = dks[j] + dk, dvs[j] + dv
            acc = [torch.cat(dks, dim=2), torch.cat(dvs, dim=2)]
            if w > 1:  # hand the accumulators on (home, after the last step)
                new_acc, acc_reqs = _exchange(acc, right, left, group)
                sent += sum(t.numel() * t.element_size() for t in acc)
                _wait(acc_reqs)
                acc = new_acc
            if step < w - 1:
                _wait(reqs)
                kv, src = tuple(nxt), (src - 1) % w
        if stats is not None:
            stats.update(backward_bytes=sent)
        return torch.cat(dqs, dim=2), acc[0], acc[1], None, None, None, None


def ring_attention(q, k, v, causal=False, group=None, layout="contiguous", stats=None):
    """Attention over the whole sequence when each rank holds one shard of it.

    Equal to ``torch.nn.functional.scaled_dot_product_attention`` on the
    sequence the shards make up (causal or not), forward and backward.

    Args:
        q, k, v: this rank's shard ``[batch, heads, seq_local, head_dim]``, the
            same shape on every rank. ``layout="contiguous"``: rank ``r`` holds
            positions ``r*seq_local ... (r+1)*seq_local - 1``; ``"zigzag"``:
            chunks ``r`` and ``2W-1-r`` of ``2W`` (:func:`zigzag_shard`).
        causal: whether position ``i`` attends only to positions ``<= i``.
        group: the process group (None: the default group).
        layout: "contiguous" or "zigzag".
        stats: a dict to fill with ``blocks`` (block products computed in the
            forward pass), ``scores`` (query-key scores they computed, per
            batch and head), ``compute_s`` (this rank's CPU seconds in the
            forward block products, waits left out), ``forward_bytes`` and,
            after backward, ``backward_bytes`` (bytes this rank handed to
            send); or None.

    Returns:
        This rank's shard of the output, shaped like ``q``.
    """
    layout = check_choice("layout", layout, LAYOUTS)
    _check_qkv(q, k, v, layout)
    return _RingAttention.apply(q, k, v, bool(causal), group, layout, stats)


class _SeqToHeads(torch.autograd.Function):
    """All-to-all: ``[b, H, s/W, d]`` sequence shard to ``[b, H/W, s, d]``."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _seq_to_heads(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _heads_to_seq(grad.contiguous(), ctx.group), None


class _HeadsToSeq(torch.autograd.Function):
    """All-to-all: ``[b, H/W, s, d]`` head group to ``[b, H, s/W, d]``."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _heads_to_seq(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _seq_to_heads(grad.contiguous(), ctx.group), None


def _seq_to_heads(x, group):
    w = dist.get_world_size(group)
    b, h, s, d = x.shape
    send = x.reshape(b, w, h // w, s, d).transpose(0, 1).contiguous()
    recv = torch.empty_like(send)  # [source rank = sequence shard, b, h/w, s, d]
    dist.all_to_all_single(recv, send, group=group)
    return recv.permute(1, 2, 0, 3, 4).reshape(b, h // w, w * s, d)


def _heads_to_seq(x, group):
    w = dist.get_world_size(group)
    b, hw, s, d = x.shape
    send = x.reshape(b, hw, w, s // w, d).permute(2, 0, 1, 3, 4).contiguous()
    recv = torch.empty_like(send)  # [source rank = head group, b, h/w, s/w, d]
    dist.all_to_all_single(recv, send, group=group)
    return recv.transpose(0, 1).reshape(b, w * hw, s // w, d)


def ulysses_attention(q, k, v, causal=False, group=None):
    """Attention over the whole sequence by an all-to-all over heads (Ulysses).

    Args:
        q, k, v: this rank's contiguous shard ``[batch, heads, seq_local,
            head_dim]``; ``heads`` must be divisible by the world size.
        causal: whether position ``i`` attends only to positions ``<= i``.
        group: the process group (None: the default group).

    Returns:
        This rank's shard of the output, shaped like ``q``.
    """
    _check_qkv(q, k, v, "contiguous")
    w = dist.get_world_size(group)
    if q.shape[1] % w:
        raise ValueError(
            f"q.shape[1]={q.shape[1]} heads must be divisible by the world size "
            f"{w}: Ulysses gives each rank heads / world_size whole heads"
        )
    qh, kh, vh = (_SeqToHeads.apply(t, group) for t in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, is_causal=causal)
    return _HeadsToSeq.apply(out, group)


__all__ = [
    "LAYOUTS",
    "chunk_ids",
    "ring_attention",
    "ulysses_attention",
    "zigzag_shard",
    "zigzag_unshard",
]
