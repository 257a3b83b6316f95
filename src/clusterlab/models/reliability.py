"""Closed forms for failures: job MTBF, checkpoint intervals, goodput, detectors.

A job that needs every one of its ``N`` parts fails when any part fails, so with
independent parts of mean time between failures ``m`` the job's is about ``m/N``.
It writes a checkpoint of cost ``C`` every ``tau`` seconds of work; a failure
loses the work since the last checkpoint and costs a restart ``R``. Young's
interval ``sqrt(2 C M)`` (Young 1974) balances the two wastes; Daly (2006) gives
the exact expected wall time for exponential failures and a higher-order interval.

The heartbeat functions are the closed forms that ``cl.sim.heartbeat`` is checked
against: a detector that suspects a process after ``timeout_s`` of silence.
"""

from __future__ import annotations

import math

import numpy as np

from .._validate import check_float, check_int

__all__ = [
    "daly_interval",
    "expected_wall_time",
    "goodput",
    "goodput_first_order",
    "heartbeat_detection_time",
    "heartbeat_false_alarm_rate",
    "job_mtbf",
    "optimal_interval",
    "young_daly_interval",
]


def _pos(name: str, value) -> float:
    return check_float(name, value, 0.0, None, low_inclusive=False)


def job_mtbf(part_mtbf_s: float, n_parts: int) -> float:
    """Mean time between failures of a job that needs all of ``n_parts`` parts.

    Args:
        part_mtbf_s: one part's mean time between failures, seconds (> 0).
        n_parts: parts the job needs, in [1, 10**9]; they fail independently.

    Returns:
        The job's MTBF in seconds, ``part_mtbf_s / n_parts`` (failure rates add).
    """
    return _pos("part_mtbf_s", part_mtbf_s) / check_int("n_parts", n_parts, 1, 10**9)


def young_daly_interval(checkpoint_cost_s: float, mtbf_s: float) -> float:
    """Young's first-order checkpoint interval, ``sqrt(2 * C * M)``, in seconds.

    Args:
        checkpoint_cost_s: time to write one checkpoint, seconds (> 0).
        mtbf_s: the job's mean time between failures, seconds (> 0).

    Returns:
        Seconds of work between checkpoints that minimise the first-order waste
        ``C / tau + tau / (2 M)``.
    """
    return math.sqrt(
        2.0 * _pos("checkpoint_cost_s", checkpoint_cost_s) * _pos("mtbf_s", mtbf_s)
    )


def daly_interval(checkpoint_cost_s: float, mtbf_s: float) -> float:
    """Daly's higher-order checkpoint interval (Daly 2006), in seconds.

    ``sqrt(2CM) * (1 + sqrt(C/2M)/3 + (C/2M)/9) - C`` while ``C < 2M``, else ``M``.

    Args:
        checkpoint_cost_s: time to write one checkpoint, seconds (> 0).
        mtbf_s: the job's mean time between failures, seconds (> 0).
    """
    c, m = _pos("checkpoint_cost_s", checkpoint_cost_s), _pos("mtbf_s", mtbf_s)
    if c >= 2.0 * m:
        return m
    x = c / (2.0 * m)
    return math.sqrt(2.0 * c * m) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - c


def _goodput_args(interval_s, checkpoint_cost_s, mtbf_s, restart_s):
    """Checked ``(tau, C, M, R)``; ``tau`` an array of finite intervals > 0."""
    tau = np.asarray(interval_s, dtype=float)
    if tau.size == 0 or not np.all(np.isfinite(tau)) or np.any(tau <= 0):
        raise ValueError(f"interval_s={interval_s!r} must be finite numbers > 0")
    c = check_float("checkpoint_cost_s", checkpoint_cost_s, 0.0)
    m = _pos("mtbf_s", mtbf_s)
    r = check_float("restart_s", restart_s, 0.0)
    return tau, c, m, r


def goodput(
    interval_s, checkpoint_cost_s: float, mtbf_s: float, restart_s: float = 0.0
):
    """Fraction of wall time spent on work that is kept (exponential failures).

    Each segment is ``interval_s`` of work plus ``checkpoint_cost_s`` of writing;
    a failure anywhere in it (rate ``1/mtbf_s``) loses the segment and costs
    ``restart_s``, during which failures may strike again. The expected time per
    segment is ``M * exp(R/M) * (exp((tau + C)/M) - 1)`` (Daly 2006), so

        goodput = tau / (M * exp(R/M) * (exp((tau + C)/M) - 1)).

    Args:
        interval_s: seconds of work between checkpoints (> 0); array-like works.
        checkpoint_cost_s: seconds to write a checkpoint (>= 0).
        mtbf_s: the job's mean time between failures, seconds (> 0).
        restart_s: seconds from a failure until work resumes (>= 0).

    Returns:
        Goodput in (0, 1]: a float, or an array shaped like ``interval_s``.
    """
    tau, c, m, r = _goodput_args(interval_s, checkpoint_cost_s, mtbf_s, restart_s)
    # expm1 keeps precision when the segment is a tiny fraction of the MTBF; when
    # it is many MTBFs long, the goodput underflows to 0 rather than overflowing.
    with np.errstate(over="ignore"):
        g = tau / m * np.exp(-r / m) / np.expm1((tau + c) / m)
    return float(g) if g.ndim == 0 else g


def goodput_first_order(
    interval_s, checkpoint_cost_s: float, mtbf_s: float, restart_s: float = 0.0
):
    """First-order goodput ``1 - C/tau - (tau/2 + R)/M`` (may go below 0).

    Good while ``tau + C`` is small against ``M``: failures then land uniformly
    in a segment and lose half of it on average. Arguments as in ``goodput``.
    """
    tau, c, m, r = _goodput_args(interval_s, checkpoint_cost_s, mtbf_s, restart_s)
    g = 1.0 - c / tau - (tau / 2.0 + r) / m
    return float(g) if g.ndim == 0 else g


def optimal_interval(
    checkpoint_cost_s: float, mtbf_s: float, restart_s: float = 0.0
) -> float:
    """The interval that maximises the exact ``goodput``, found numerically.

    Golden-section search on log(tau) between ``1e-3 * C`` and ``100 * M``; the
    goodput has a single peak there. Returns seconds.
    """
    c, m = _pos("checkpoint_cost_s", checkpoint_cost_s), _pos("mtbf_s", mtbf_s)
    lo, hi = math.log(1e-3 * min(c, m)), math.log(100.0 * m)
    phi = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = hi - phi * (hi - lo), lo + phi * (hi - lo)
    fa = goodput(math.exp(a), c, m, restart_s)
    fb = goodput(math.exp(b), c, m, restart_s)
    for _ in range(200):
        if fa < fb:
            lo, a, fa = a, b, fb
            b = lo + phi * (hi - lo)
            fb = goodput(math.exp(b), c, m, restart_s)
        else:
            hi, b, fb = b, a, fa
            a = hi - phi * (hi - lo)
            fa = goodput(math.exp(a), c, m, restart_s)
    return math.exp((lo + hi) / 2.0)


def expected_wall_time(
    work_s: float,
    interval_s: float,
    checkpoint_cost_s: float,
    mtbf_s: float,
    restart_s: float = 0.0,
) -> float:
    """Expected wall-clock seconds to finish ``work_s`` of work: work / goodput."""
    return _pos("work_s", work_s) / goodput(
        interval_s, checkpoint_cost_s, mtbf_s, restart_s
    )


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
