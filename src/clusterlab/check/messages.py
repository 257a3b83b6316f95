"""Exercise check: reduce to rank 0, then broadcast the total."""

from __future__ import annotations

import torch

from ._common import launch_answer, not_attempted, passed, short

__all__ = ["reduce_then_broadcast"]


def _rtb_worker(rank, world_size, answer, seed):
    gen = torch.Generator().manual_seed(seed + rank)
    mine = torch.randn(5, generator=gen, dtype=torch.float64)
    got = answer(mine.clone(), rank, world_size)
    return {"mine": mine, "got": got}


def reduce_then_broadcast(fn, world_sizes=(2, 3, 4)) -> bool:
    """Check the exercise: every rank must end with the sum of all tensors."""
    name = "reduce_then_broadcast"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function reduce_then_broadcast")
    for n in world_sizes:
        results = launch_answer(
            name,
            _rtb_worker,
            n,
            "If it ran out of time, look "
            "for a recv with no matching send (both ranks waiting for each "
            "other is a deadlock).",
            answer=fn,
            seed=1234,
        )
        if results is None:
            return not_attempted(name)
        expected = sum(r["mine"] for r in results)
        for rank, r in enumerate(results):
            got = r["got"]
            if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
                raise AssertionError(
                    f"{name} on {n} ranks: rank {rank} returned {got!r}; return a "
                    f"tensor shaped like the input, {tuple(expected.shape)}"
                )
            if not torch.allclose(got, expected):
                hint = (
                    "it still holds its own values: did rank 0 send the total back?"
                    if torch.allclose(got, r["mine"])
                    else "check that rank 0 adds every other rank's tensor exactly once"
                )
                raise AssertionError(
                    f"{name} on {n} ranks: rank {rank} returned {short(got)} but "
                    f"the sum over ranks is {short(expected)}; {hint}"
                )
    sizes = ", ".join(str(n) for n in world_sizes)
    return passed(name, f"every rank holds the sum on {sizes} ranks")
