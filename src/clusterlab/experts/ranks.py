"""Expert parallelism: tokens travel to their experts and back in two all-to-alls.

In a mixture-of-experts layer with expert parallelism, rank ``r`` of ``W`` holds
experts ``r * E / W`` to ``(r + 1) * E / W - 1``. A token routed to experts on
other ranks must go there and come back:

1. **dispatch**: every rank sorts its token copies by expert, tells every other
   rank how many it will send for each of that rank's experts (a small, equal-
   split all-to-all of counts), then sends the copies in one all-to-all with
   *uneven* splits (``dist.all_to_all_single``);
2. the experts run on what arrived;
3. **combine**: the outputs go back by the reverse all-to-all, and each token
   sums its ``k`` experts' outputs, weighted by the router.

Both steps are differentiable: the gradient of an all-to-all is the reverse
all-to-all (``_AllToAll`` below), so gradients reach the tokens and the router
on their own rank and the experts' parameters on theirs. ``capacity`` caps
how many copies a rank sends to one expert; the rest are dropped (their
contribution is zero, and the token goes on through the residual path), first
choices taking precedence over second ones, as in GShard.

Run it on its own (four ranks, gloo on CPU, NCCL on GPUs)::

    torchrun --nproc-per-node 4 -m clusterlab.experts.workers
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from clusterlab.core.validate import check_int


class _AllToAll(torch.autograd.Function):
    """All-to-all with uneven splits; its backward is the reverse all-to-all."""

    @staticmethod
    def forward(ctx, x, out_splits, in_splits, group):
        ctx.splits, ctx.group = (out_splits, in_splits), group
        out = x.new_empty((sum(out_splits), *x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        out_splits, in_splits = ctx.splits
        back = grad.new_empty((sum(in_splits), *grad.shape[1:]))
        # An incoming gradient may be a strided view, and gloo refuses those.
        dist.all_to_all_single(
            back, grad.contiguous(), in_splits, out_splits, group=ctx.group
        )
        return back, None, None, None


@dataclass(frozen=True)
class DispatchPlan:
    """What ``combine`` needs to send outputs back and put them in order.

    Attributes:
        n_tokens, top_k: shape of this rank's ``expert_ids``.
        order: the kept copies (flat index ``token * top_k + slot``), sorted by
            expert, in the order they were sent.
        send_splits, recv_splits: rows sent to / received from each rank.
        arrival: for each row of the concatenated expert inputs, its row in
            what arrived (which is grouped by source rank).
        expert_counts: rows each local expert received.
        kept: ``[n_tokens, top_k]`` bool, False where a copy was dropped.
        group: the process group.
    """

    n_tokens: int
    top_k: int
    order: torch.Tensor
    send_splits: list
    recv_splits: list
    arrival: torch.Tensor
    expert_counts: list
    kept: torch.Tensor
    group: object = None

    @property
    def dropped(self) -> int:
        """Token copies this rank dropped for lack of capacity."""
        return int((~self.kept).sum())


def _check(tokens, expert_ids, n_experts, world_size):
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2:
        shape = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else tokens
        raise ValueError(f"tokens={shape!r} must be a 2-D tensor [T, h]")
    if not isinstance(expert_ids, torch.Tensor) or expert_ids.dim() != 2:
        raise ValueError(
            f"expert_ids={expert_ids!r} must be a 2-D integer tensor [T, k]"
        )
    if expert_ids.dtype.is_floating_point or expert_ids.dtype == torch.bool:
        raise ValueError(f"expert_ids.dtype={expert_ids.dtype} must be an integer type")
    if expert_ids.shape[0] != tokens.shape[0]:
        raise ValueError(
            f"expert_ids.shape={tuple(expert_ids.shape)} must have as many rows "
            f"as tokens (T={tokens.shape[0]})"
        )
    e = check_int("n_experts", n_experts, 1)
    if e % world_size:
        raise ValueError(
            f"n_experts={e} must be a multiple of the world size {world_size}"
        )
    if expert_ids.numel():
        lo, hi = int(expert_ids.min()), int(expert_ids.max())
        if lo < 0 or hi >= e:
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"expert_ids holds {bad}: allowed [0, {e - 1}] (n_experts={e})"
            )
    return e


def _keep_within(ids: torch.Tensor, n_experts: int, capacity: int) -> torch.Tensor:
    """Mask of the copies that fit: per expert, first choices first, then by token."""
    slot_major = ids.t().reshape(-1)  # all first choices, then all second ones
    order = torch.argsort(slot_major, stable=True)
    sorted_ids = slot_major[order]
    starts = torch.searchsorted(sorted_ids, torch.arange(n_experts, device=ids.device))
    rank_in_expert = torch.arange(len(order), device=ids.device) - starts[sorted_ids]
    keep = torch.empty_like(slot_major, dtype=torch.bool)
    keep[order] = rank_in_expert < capacity
    return keep.reshape(ids.shape[1], ids.shape[0]).t()


def dispatch(tokens, expert_ids, n_experts, group=None, *, capacity=None):
    """Send each of this rank's token copies to the rank that holds its expert.

    Args:
        tokens: this rank's tokens, ``[T, h]`` (T may differ between ranks).
        expert_ids: ``[T, k]`` integers in ``[0, n_experts)``, the router's picks.
        n_experts: experts in all, a multiple of the group's size ``W``; rank
            ``r`` holds experts ``r * E / W`` to ``(r + 1) * E / W - 1``.
        group: the expert-parallel process group (default: the whole world).
        capacity: most copies this rank sends to one expert (None: no limit);
            see ``cl.models.moe.expert_capacity``.

    Returns:
        ``(expert_inputs, plan)``: a list with one ``[n_e, h]`` tensor per local
        expert (``n_e`` may be 0), rows grouped by source rank then token order;
        and the :class:`DispatchPlan` that :func:`combine` needs.
    """
    world = dist.get_world_size(group)
    e = _check(tokens, expert_ids, n_experts, world)
    local = e // world
    n_tokens, top_k = expert_ids.shape
    ids = expert_ids.to(device=tokens.device, dtype=torch.long)
    kept = torch.ones_like(ids, dtype=torch.bool)
    if capacity is not None:
        kept = _keep_within(ids, e, check_int("capacity", capacity, 0))
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    order = order[kept.reshape(-1)[order]]
    send_counts = torch.bincount(flat[order], minlength=e)  # per expert
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts, group=group)
    recv_counts = recv_counts.reshape(world, local)  # [source rank, local expert]
    send_splits = send_counts.reshape(world, local).sum(1).tolist()
    recv_splits = recv_counts.sum(1).tolist()
    arrived = _AllToAll.apply(tokens[order // top_k], recv_splits, send_splits, group)
    label = torch.arange(local, device=ids.device).repeat(world)
    label = torch.repeat_interleave(label, recv_counts.reshape(-1))
    arrival = torch.argsort(label, stable=True)  # group the rows by local expert
    counts = recv_counts.sum(0).tolist()
    inputs = list(torch.split(arrived[arrival], counts))
    plan = DispatchPlan(
        n_tokens, top_k, order, send_splits, recv_splits, arrival, counts, kept, group
    )
    return inputs, plan


def combine(expert_outputs, plan: DispatchPlan, weights):
    """Bring the experts' outputs home and sum each token's, weighted.

    Args:
        expert_outputs: one ``[n_e, h_out]`` tensor per local expert, in the
            order of ``dispatch``'s ``expert_inputs``.
        plan: the :class:`DispatchPlan` ``dispatch`` returned.
        weights: ``[T, k]`` router weights of this rank's tokens.

    Returns:
        ``[T, h_out]``: for each token, in its original order, the
        ``weights``-weighted sum of its kept experts' outputs (a dropped copy
        adds nothing).
    """
    if len(expert_outputs) != len(plan.expert_counts):
        raise ValueError(
            f"len(expert_outputs)={len(expert_outputs)} must equal the local "
            f"experts, {len(plan.expert_counts)}"
        )
    for i, (y, n) in enumerate(zip(expert_outputs, plan.expert_counts, strict=True)):
        if y.dim() != 2 or y.shape[0] != n:
            raise ValueError(
                f"expert_outputs[{i}].shape={tuple(y.shape)} must be [{n}, h_out]"
            )
    shape = (plan.n_tokens, plan.top_k)
    if tuple(weights.shape) != shape:
        raise ValueError(f"weights.shape={tuple(weights.shape)} must be {shape}")
    y = torch.cat(list(expert_outputs))
    inverse = torch.empty_like(plan.arrival)
    inverse[plan.arrival] = torch.arange(len(plan.arrival), device=y.device)
    back = _AllToAll.apply(y[inverse], plan.send_splits, plan.recv_splits, plan.group)
    copies = back.new_zeros((plan.n_tokens * plan.top_k, y.shape[1]))
    copies = copies.index_copy(0, plan.order, back)
    copies = copies.reshape(plan.n_tokens, plan.top_k, y.shape[1])
    w = weights * plan.kept.to(weights.dtype)
    return (copies * w.unsqueeze(-1)).sum(1)


__all__ = ["DispatchPlan", "combine", "dispatch"]
