"""Failure detection: closed forms for a heartbeat detector.

A monitored process sends a heartbeat every ``interval_s``; the detector
suspects it after ``timeout_s`` of silence. These two formulas give the mean
detection time of a crash and the rate of false suspicions of a live process;
``cl.failures.sim`` simulates the same detector event by event, with no formula
inside, and the tests check one against the other.
"""

from __future__ import annotations

import numpy as np

from clusterlab.core.validate import check_float


def _pos(name: str, value) -> float:
    return check_float(name, value, 0.0, None, low_inclusive=False)


def _laplace_sf(x, scale_s: float):
    """P(L > x) for L, the difference of two i.i.d. exponential jitters."""
    x = np.asarray(x, dtype=float)
    if scale_s == 0.0:
        return (x < 0).astype(float)
    half = 0.5 * np.exp(-np.abs(x) / scale_s)
    return np.where(x >= 0, half, 1.0 - half)


def heartbeat_false_alarm_rate(
    timeout_s, interval_s: float, jitter_s: float, loss: float, *, terms: int = 200
):
    """False suspicions per second of a heartbeat detector watching a live process.

    Heartbeats leave every ``interval_s``; each is lost with probability ``loss``
    or arrives after a fixed delay plus an exponential jitter of mean ``jitter_s``.
    The detector suspects after ``timeout_s`` with no heartbeat. After a delivered
    heartbeat the next delivered one is ``g + 1`` intervals later with probability
    ``loss**g * (1 - loss)``, and the two jitters differ by a Laplace variable, so

        rate = (1 - loss) / interval * sum_g loss**g (1 - loss) P(L > T - (g+1) dt).

    Exact while heartbeats stay in order (jitter well below the interval); the
    fixed part of the delay cancels.

    Args:
        timeout_s: seconds of silence before suspecting (> 0); array-like works.
        interval_s: seconds between heartbeats (> 0).
        jitter_s: mean of the exponential part of the delay, seconds (>= 0).
        loss: probability that a heartbeat is lost, in [0, 1).

    Returns:
        False alarms per second (a float, or an array shaped like ``timeout_s``).
    """
    t = np.asarray(timeout_s, dtype=float)
    dt = _pos("interval_s", interval_s)
    j = check_float("jitter_s", jitter_s, 0.0)
    p = check_float("loss", loss, 0.0, 0.999)
    g = np.arange(terms).reshape((-1,) + (1,) * t.ndim)
    terms_ = p**g * (1.0 - p) * _laplace_sf(t - (g + 1) * dt, j)
    rate = (1.0 - p) / dt * terms_.sum(axis=0)
    return float(rate) if rate.ndim == 0 else rate


def heartbeat_detection_time(
    timeout_s, interval_s: float, base_delay_s: float, jitter_s: float, loss: float
):
    """Mean seconds from a crash until a heartbeat detector suspects it.

    The crash falls uniformly inside an interval (``-dt/2`` on average after the
    last heartbeat sent); that heartbeat still arrives, after the mean delay
    ``d0 + j``; lost ones move the last arrival back ``dt * loss / (1 - loss)``
    on average; then the detector waits ``timeout_s``:

        T_D = T + d0 + j - dt / 2 - dt * loss / (1 - loss).

    Arguments as in ``heartbeat_false_alarm_rate``; ``base_delay_s`` >= 0 is the
    fixed part of the delay. Returns seconds (float or array).
    """
    t = np.asarray(timeout_s, dtype=float)
    dt = _pos("interval_s", interval_s)
    d0 = check_float("base_delay_s", base_delay_s, 0.0)
    j = check_float("jitter_s", jitter_s, 0.0)
    p = check_float("loss", loss, 0.0, 0.999)
    td = t + d0 + j - dt / 2.0 - dt * p / (1.0 - p)
    return float(td) if td.ndim == 0 else td


__all__ = ["heartbeat_detection_time", "heartbeat_false_alarm_rate"]
