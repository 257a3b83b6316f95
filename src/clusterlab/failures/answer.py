"""Reference solution: a heartbeat detector's mean detection time."""

from __future__ import annotations


def mean_detection_time(timeout_s: float, interval_s: float, mean_delay_s: float):
    """Mean seconds from a crash to suspicion, with no heartbeat lost.

    The crash falls on average half an interval after the last heartbeat was
    sent; that heartbeat still arrives, ``mean_delay_s`` after it left; the
    detector then waits ``timeout_s`` of silence.
    """
    return timeout_s + mean_delay_s - interval_s / 2


__all__ = ["mean_detection_time"]
