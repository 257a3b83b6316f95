"""Reference solutions: bus bandwidth and matmul intensity."""

from __future__ import annotations

_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}


def busbw_from_algbw(op: str, algbw_Bps: float, world_size: int) -> float:
    """Nccl-tests' bus bandwidth from the algorithm bandwidth.

    An all-reduce on a ring sends and receives 2(n - 1)/n of the buffer per rank
    (a reduce-scatter then an all-gather); all-gather and reduce-scatter each
    (n - 1)/n; a broadcast passes the whole buffer along once.
    """
    return algbw_Bps * _FACTORS[op](world_size)


__all__ = ["busbw_from_algbw"]
