"""Reference solution: the first-order waste of a checkpoint interval."""

from __future__ import annotations


def checkpoint_waste(interval_s: float, checkpoint_cost_s: float, mtbf_s: float):
    """First-order fraction of time wasted, checkpoints plus lost work.

    A checkpoint of cost C every tau seconds wastes C / tau; a failure, once per
    M seconds, loses on average half an interval, tau / 2.
    """
    return checkpoint_cost_s / interval_s + interval_s / (2 * mtbf_s)


__all__ = ["checkpoint_waste"]
