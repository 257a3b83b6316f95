"""Reference solutions: failure detection and checkpoint waste."""

from __future__ import annotations

__all__ = ["checkpoint_waste", "mean_detection_time"]


def mean_detection_time(timeout_s: float, interval_s: float, mean_delay_s: float):
    """Mean seconds from a crash to suspicion, with no heartbeat lost.

    The crash falls on average half an interval after the last heartbeat was
    sent; that heartbeat still arrives, ``mean_delay_s`` after it left; the
    detector then waits ``timeout_s`` of silence.
    """
    return timeout_s + mean_delay_s - interval_s / 2


def checkpoint_waste(interval_s: float, checkpoint_cost_s: float, mtbf_s: float):
    """First-order fraction of time wasted, checkpoints plus lost work.

    A checkpoint of cost C every tau seconds wastes C / tau; a failure, once per
    M seconds, loses on average half an interval, tau / 2.
    """
    return checkpoint_cost_s / interval_s + interval_s / (2 * mtbf_s)
