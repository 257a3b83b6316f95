"""The example's reference solution."""

from __future__ import annotations


def total_of(values: list[float]) -> float:
    """The sum of ``values``."""
    return float(sum(values))
