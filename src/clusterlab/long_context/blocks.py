"""Blockwise attention: one query block against one key block, and how to merge.

Attention over a long sequence can be computed one key block at a time if
each partial result carries its softmax normaliser. For queries ``Q`` and one
block of keys and values ``K_j, V_j`` (scale ``c = 1/sqrt(d)``):

    S_j = c Q K_j^T,   lse_j = log sum exp(S_j) (per query row),
    O_j = softmax(S_j) V_j.

Two partial results merge exactly, the **online softmax** (Milakov and
Gimelshein 2018; the rescaling FlashAttention and ring attention use)::

    lse = logaddexp(lse_a, lse_b)
    O   = exp(lse_a - lse) O_a + exp(lse_b - lse) O_b

The backward pass needs only ``lse`` (not the scores) and ``delta = sum(dO *
O)`` per row: ``P_j = exp(S_j - lse)``, ``dV_j = P_j^T dO``, ``dS_j = P_j *
(dO V_j^T - delta)``, ``dQ += c dS_j K_j``, ``dK_j = c dS_j^T Q``.

These are local tensor functions; :mod:`clusterlab.long_context.ranks`
passes the blocks round the ranks.
"""

from __future__ import annotations

import torch


def _scores(q, k, scale, diagonal):
    s = (q @ k.transpose(-2, -1)) * scale
    if diagonal:  # query i may see keys 0..i of the same chunk
        n_q, n_k = s.shape[-2], s.shape[-1]
        keep = torch.ones(n_q, n_k, dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return s


def block_attention_forward(q, k, v, scale: float, diagonal: bool = False):
    """Attention of one query block over one key block, with its normaliser.

    Args:
        q: queries ``[..., n_q, d]``.
        k, v: keys and values ``[..., n_k, d]``.
        scale: the score scale (``1 / sqrt(d)`` for standard attention).
        diagonal: True when both blocks cover the same positions under a causal
            mask (query ``i`` sees keys ``0..i``).

    Returns:
        ``(out, lse)``: ``[..., n_q, d]`` normalised within the block, and the
        log-sum-exp of each query's scores ``[..., n_q]``.
    """
    s = _scores(q, k, scale, diagonal)
    lse = torch.logsumexp(s, dim=-1)
    return torch.exp(s - lse.unsqueeze(-1)) @ v, lse


def merge_partial_attention(out_a, lse_a, out_b, lse_b):
    """Merge two blocks' attention results into the result over both.

    Args:
        out_a, out_b: ``[..., n_q, d]``, each normalised over its own keys.
        lse_a, lse_b: ``[..., n_q]`` log-sum-exp of each block's scores
            (``-inf`` for a block not seen yet).

    Returns:
        ``(out, lse)`` over the keys of both blocks.
    """
    lse = torch.logaddexp(lse_a, lse_b)
    wa = torch.exp(lse_a - lse).unsqueeze(-1)
    wb = torch.exp(lse_b - lse).unsqueeze(-1)
    return wa * out_a + wb * out_b, lse


def block_attention_backward(q, k, v, dout, lse, delta, scale, diagonal=False):
    """Gradients of one query block's attention through one key block.

    Args:
        q, k, v, scale, diagonal: as for :func:`block_attention_forward`.
        dout: gradient of the final output for these queries ``[..., n_q, d]``.
        lse: the final log-sum-exp over all keys ``[..., n_q]``.
        delta: ``(dout * out).sum(-1)`` of the final output ``[..., n_q]``.

    Returns:
        ``(dq, dk, dv)``: this block's share of dq, and dk, dv of the block.
    """
    p = torch.exp(_scores(q, k, scale, diagonal) - lse.unsqueeze(-1))
    dv = p.transpose(-2, -1) @ dout
    ds = p * (dout @ v.transpose(-2, -1) - delta.unsqueeze(-1))
    dq = (ds @ k) * scale
    dk = (ds.transpose(-2, -1) @ q) * scale
    return dq, dk, dv


def block_pairs(q_chunks, k_chunks, causal: bool):
    """Which (query chunk, key chunk) products a step computes, and how.

    Chunks are numbered by their position in the whole sequence, all of one
    length. Without a mask every pair is computed in full; with a causal mask
    a key chunk before the query chunk is full, the same chunk is diagonal
    (masked), a later one is skipped.

    Args:
        q_chunks: global chunk numbers of this rank's queries, in local order.
        k_chunks: global chunk numbers of the key block in hand, in local order.
        causal: whether the attention is causal.

    Returns:
        ``[(i, j, diagonal)]``: local query chunk ``i`` against local key chunk
        ``j``, ``diagonal`` True where the causal mask applies inside.
    """
    pairs = []
    for i, qc in enumerate(q_chunks):
        for j, kc in enumerate(k_chunks):
            if not causal or kc < qc:
                pairs.append((i, j, False))
            elif kc == qc:
                pairs.append((i, j, True))
    return pairs


__all__ = [
    "block_attention_backward",
    "block_attention_forward",
    "block_pairs",
    "merge_partial_attention",
]
