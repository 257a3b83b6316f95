"""Exercise check: average the gradients over ranks in one all-reduce."""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..dist.data_parallel import dp_mlp, one_thread_per_rank
from ._common import launch_answer, not_attempted, passed

__all__ = ["average_gradients", "fsdp_bytes_per_rank"]


def _avg_worker(rank, world_size, answer, seed):
    one_thread_per_rank()
    model = dp_mlp(width=8, depth=1, seed=seed)
    gen = torch.Generator().manual_seed(seed + 7919 * rank)
    for p in model.parameters():  # each rank's own gradient, as after backward()
        p.grad = torch.randn(p.shape, generator=gen)
    mine = [p.grad.clone() for p in model.parameters()]
    calls = []
    original = dist.all_reduce

    def counting_all_reduce(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    dist.all_reduce = counting_all_reduce  # only inside this forked rank
    try:
        answer(model, world_size)
    finally:
        dist.all_reduce = original
    got = [p.grad.clone() for p in model.parameters()]
    return {"mine": mine, "got": got, "calls": len(calls)}


def _verdict(results, n, name):
    """Raise AssertionError with a hint unless every rank holds the mean."""
    count = len(results[0]["mine"])
    for i in range(count):
        total = sum(r["mine"][i] for r in results)
        mean = total / n
        for rank, r in enumerate(results):
            got = r["got"][i]
            if got.shape != mean.shape or torch.allclose(got, mean, atol=1e-6):
                continue
            if torch.allclose(got, total, atol=1e-5):
                hint = "it holds the sum over ranks: divide by world_size"
            elif torch.allclose(got, r["mine"][i]):
                hint = "it still holds its own gradient: was it all-reduced?"
            else:
                hint = "check that each slice of the bucket goes back to its tensor"
            raise AssertionError(
                f"{name} on {n} ranks: rank {rank}'s gradient of parameter {i} "
                f"is not the mean over ranks; {hint}"
            )


def average_gradients(fn, world_sizes=(2, 4)) -> bool:
    """Check the exercise: each rank's gradients become the mean over ranks.

    Args:
        fn: the reader's ``average_gradients(model, world_size)``.
        world_sizes: ranks to try, each in [2, 8].

    Returns:
        True when it passes, False when ``fn`` is still a stub.
    """
    name = "average_gradients"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function average_gradients")
    calls = 0
    for n in world_sizes:
        results = launch_answer(
            name,
            _avg_worker,
            n,
            "If it ran out of time, "
            "check that every rank calls the same collectives in the same order.",
            answer=fn,
            seed=2024,
        )
        if results is None:
            return not_attempted(name)
        _verdict(results, n, name)
        calls = max(calls, results[0]["calls"])
    if calls > 1:
        raise AssertionError(
            f"{name} gives the right mean but called dist.all_reduce {calls} times; "
            "copy the gradients into one flat bucket and all-reduce it once"
        )
    sizes = ", ".join(str(n) for n in world_sizes)
    return passed(
        name,
        f"every rank holds the mean gradient on {sizes} ranks, with one all-reduce",
    )


def fsdp_bytes_per_rank(fn) -> bool:
    """Check the exercise: model-state bytes per rank, fp32 Adam, any ZeRO stage.

    Args:
        fn: the reader's ``fsdp_bytes_per_rank(n_params, world_size, zero_stage)``.

    Returns:
        True when it passes, False when ``fn`` is still a stub.
    """
    from ..models.memory import training_memory

    name = "fsdp_bytes_per_rank"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function fsdp_bytes_per_rank")
    for n_params in (1e6, 7e9):
        for world_size in (1, 2, 8, 64):
            for stage in (0, 1, 2, 3):
                try:
                    got = float(fn(n_params, world_size, stage))
                except NotImplementedError:
                    return not_attempted(name)
                want = training_memory(
                    n_params,
                    dp=world_size,
                    zero_stage=stage,
                    weight_bytes=4,
                    grad_bytes=4,
                    optimizer_bytes=8,
                )["total"]
                if abs(got - want) <= 1e-9 * want:
                    continue
                if abs(got - 16 * n_params / world_size) <= 1e-9 * want:
                    hint = "below stage 3 not everything is sharded"
                elif abs(got - 16 * n_params) <= 1e-9 * want:
                    hint = "the sharded parts are divided by world_size"
                else:
                    hint = (
                        "weights 4 B, gradients 4 B, Adam's moments 8 B per parameter"
                    )
                raise AssertionError(
                    f"{name}({n_params:g}, {world_size}, {stage}) returned {got:,.0f} "
                    f"bytes; the ZeRO formula gives {want:,.0f}: {hint}"
                )
    return passed(name, "matches ZeRO's formula for stages 0-3 and 1-64 ranks")
