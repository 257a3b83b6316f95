"""Exercise check: the all-gather half of the ring all-reduce."""

from __future__ import annotations

import torch

from clusterlab.core.checks import launch_answer, not_attempted, passed, short
from clusterlab.ring.ranks import ring_reduce_scatter

#: A length no world size in 2..4 divides, so the chunks are uneven.
_LENGTH = 11


def _ag_worker(rank, world_size, answer, seed):
    gen = torch.Generator().manual_seed(seed + rank)
    mine = torch.randn(_LENGTH, generator=gen, dtype=torch.float64)
    work = mine.clone()
    chunks = list(torch.tensor_split(work, world_size))
    ring_reduce_scatter(chunks)
    after_rs = work.clone()
    answer(chunks, rank, world_size)
    return {"mine": mine, "after_rs": after_rs, "got": work}


def _hint(got, expected, after_rs, rank, n) -> str:
    owned = (rank + 1) % n
    spans = torch.tensor_split(torch.arange(_LENGTH), n)
    right = [torch.allclose(got[s], expected[s]) for s in spans]
    if torch.equal(got, after_rs):
        return "nothing changed: did you receive into the chunks list itself?"
    if right[owned] and sum(right) == 1:
        return "only the chunk it owned is right: are there n - 1 steps?"
    if not right[owned]:
        return (
            f"it overwrote chunk {owned}, the one it owned after the reduce-scatter: "
            "at step s rank r sends chunk (r + 1 - s) % n and receives (r - s) % n"
        )
    return "some chunks are stale: check which chunk index is sent at each step"


def ring_allgather(fn, world_sizes=(2, 3, 4)) -> bool:
    """Check the exercise: after the all-gather every rank holds every sum."""
    name = "ring_allgather"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function ring_allgather")
    for n in world_sizes:
        results = launch_answer(
            name,
            _ag_worker,
            n,
            "If it ran out of time, every "
            "rank may be blocked in a send or a recv: post the send with "
            "dist.isend, then recv, then wait for the send.",
            answer=fn,
            seed=2024,
        )
        if results is None:
            return not_attempted(name)
        expected = sum(r["mine"] for r in results)
        for rank, r in enumerate(results):
            if not torch.allclose(r["got"], expected):
                hint = _hint(r["got"], expected, r["after_rs"], rank, n)
                raise AssertionError(
                    f"{name} on {n} ranks: rank {rank} ends with {short(r['got'])} "
                    f"but the sum is {short(expected)}; {hint}"
                )
    sizes = ", ".join(str(n) for n in world_sizes)
    return passed(name, f"every rank holds all {_LENGTH} sums on {sizes} ranks")


__all__ = ["ring_allgather"]
