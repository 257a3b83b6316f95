"""A mixture-of-experts layer in one process: what expert parallelism must equal.

A router scores each token against ``E`` experts, keeps the ``top_k`` best and
normalises their scores with a softmax (as Mixtral does); the layer's output
is the weighted sum of those experts' outputs. ``moe_reference`` computes it
with no communication, one expert after another, and is what
``cl.experts.ranks``'s dispatch and combine are checked against,
outputs and gradients alike. Capacity is applied here by a plain loop, not by
the code under test.
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from clusterlab.core.validate import check_int
from clusterlab.tensor_parallel.ranks import make_mlp


@contextlib.contextmanager
def one_thread():
    """Run torch on one thread inside the block, then restore the setting.

    The book's layers are tiny: threads only add overhead, and on a machine
    whose cores are all busy their spin-waits make each operation many times
    slower (20 router steps: 0.1 s on one thread, 4.6 s on two, measured).
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def make_experts(n_experts: int, hidden: int, ffn: int, seed: int = 0) -> nn.ModuleList:
    """``n_experts`` MLPs (Linear → GELU → Linear), expert ``e`` from ``seed``, ``e``.

    Every rank can build the same experts, and keep only its own.

    Args:
        n_experts: experts, >= 1.
        hidden: model width h, >= 1.
        ffn: each expert's inner width, >= 1.
        seed: the experts' weights depend on it and on their index only.
    """
    check_int("n_experts", n_experts, 1)
    return nn.ModuleList(
        make_mlp(hidden, ffn, seed * 100_003 + e) for e in range(n_experts)
    )


def expert_slice(n_experts: int, rank: int, world_size: int) -> range:
    """The experts rank ``rank`` of ``world_size`` holds: a contiguous block."""
    w = check_int("world_size", world_size, 1)
    r = check_int("rank", rank, 0, w - 1)
    e = check_int("n_experts", n_experts, w)
    if e % w:
        raise ValueError(f"n_experts={e} must be a multiple of world_size={w}")
    local = e // w
    return range(r * local, (r + 1) * local)


def route(logits: torch.Tensor, top_k: int):
    """Top-k routing: the ``top_k`` best experts and softmax weights over them.

    Args:
        logits: ``[T, E]`` router scores.
        top_k: experts per token, in [1, E].

    Returns:
        ``(weights, expert_ids)``, both ``[T, top_k]``; each row of weights
        sums to 1.
    """
    k = check_int("top_k", top_k, 1, logits.shape[-1])
    top, ids = torch.topk(logits, k, dim=-1)
    return torch.softmax(top, dim=-1), ids


def within_capacity(expert_ids: torch.Tensor, capacity: int | None) -> torch.Tensor:
    """``[T, k]`` bool: which copies an expert of that capacity takes.

    Each expert takes copies until it holds ``capacity``: all first choices in
    token order, then all second choices, and so on (GShard's priority).
    """
    ids = expert_ids.tolist()
    kept = torch.ones(expert_ids.shape, dtype=torch.bool)
    if capacity is None:
        return kept
    held: dict[int, int] = {}
    for slot in range(expert_ids.shape[1]):
        for t, row in enumerate(ids):
            held[row[slot]] = held.get(row[slot], 0) + 1
            kept[t, slot] = held[row[slot]] <= capacity
    return kept


def moe_reference(tokens, expert_ids, weights, experts, capacity=None):
    """The MoE layer in one process: each token's weighted sum over its experts.

    Args:
        tokens: ``[T, h]``.
        expert_ids: ``[T, k]`` integers in ``[0, len(experts))``.
        weights: ``[T, k]`` router weights.
        experts: all the experts, a sequence of modules.
        capacity: most copies one expert takes (None: no limit); see
            :func:`within_capacity`.

    Returns:
        ``[T, h_out]``; a dropped copy adds nothing.
    """
    kept = within_capacity(expert_ids, capacity).to(tokens.device)
    out = None
    for e, expert in enumerate(experts):
        hit = (expert_ids == e) & kept
        rows, slots = hit.nonzero(as_tuple=True)
        y = expert(tokens[rows]) * weights[rows, slots].unsqueeze(-1)
        if out is None:
            out = tokens.new_zeros((tokens.shape[0], y.shape[1]))
        out = out.index_add(0, rows, y)
    return out


def load_imbalance(expert_ids: torch.Tensor, n_experts: int) -> float:
    """Busiest expert's load over the mean load: 1 when routing is perfectly even."""
    e = check_int("n_experts", n_experts, 1)
    counts = torch.bincount(expert_ids.reshape(-1), minlength=e).double()
    return float(counts.max() / counts.mean())


__all__ = [
    "expert_slice",
    "load_imbalance",
    "make_experts",
    "moe_reference",
    "one_thread",
    "route",
    "within_capacity",
]
