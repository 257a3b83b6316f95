"""Checkpointing: job MTBF, the Young/Daly interval and goodput (closed forms).

A job that needs every one of its ``N`` parts fails when any part fails, so with
independent parts of mean time between failures ``m`` the job's is about ``m/N``.
It writes a checkpoint of cost ``C`` every ``tau`` seconds of work; a failure
loses the work since the last checkpoint and costs a restart ``R``. Young's
interval ``sqrt(2 C M)`` (Young 1974) balances the two wastes; Daly (2006) gives
the exact expected wall time for exponential failures and a higher-order interval.

``cl.checkpointing.sim`` simulates the same job with no formula inside, and the
tests check these closed forms against it.
"""

from __future__ import annotations

import math

import numpy as np

from clusterlab.core.validate import check_float, check_int


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
    while hi - lo > 1e-10:  # a relative 1e-10 in tau
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


def mtbf_from_count(duration_s: float, failures: int) -> float:
    """Observed mean time between failures: ``duration_s / failures``, seconds.

    Args:
        duration_s: how long the job was watched, seconds (> 0).
        failures: failures seen in that time, in [1, 10**9].
    """
    return _pos("duration_s", duration_s) / check_int("failures", failures, 1, 10**9)


def part_mtbf(job_mtbf_s: float, n_parts: int) -> float:
    """The MTBF each of ``n_parts`` parts must have for a job MTBF of ``job_mtbf_s``.

    The inverse of ``job_mtbf``: ``job_mtbf_s * n_parts``, seconds.
    """
    return _pos("job_mtbf_s", job_mtbf_s) * check_int("n_parts", n_parts, 1, 10**9)


def checkpoint_cost_for_goodput(
    target: float, mtbf_s: float, restart_s: float = 0.0
) -> float:
    """The largest checkpoint cost whose best goodput still reaches ``target``.

    Bisection on ``C`` (to a relative 1e-9) of the exact ``goodput`` at its own
    ``optimal_interval``; the best goodput falls as ``C`` grows.

    Args:
        target: goodput to reach, in (0, 1).
        mtbf_s: the job's mean time between failures, seconds (> 0).
        restart_s: seconds from a failure until work resumes (>= 0).

    Returns:
        Seconds; the interval that achieves it is ``optimal_interval(C, M, R)``.

    Raises:
        ValueError: if even a free checkpoint misses ``target`` (restarts alone
            cost more).
    """
    g = check_float("target", target, 0.0, 1.0, low_inclusive=False)
    if g >= 1.0:
        raise ValueError(f"target={target!r} is out of range: allowed (0, 1)")
    m, r = _pos("mtbf_s", mtbf_s), check_float("restart_s", restart_s, 0.0)

    def best(c):
        return goodput(optimal_interval(c, m, r), c, m, r)

    lo, hi = 1e-9 * m, m
    if best(lo) < g:
        raise ValueError(
            f"target={target!r} is out of reach with restart_s={r:g} and "
            f"mtbf_s={m:g}: even a free checkpoint gives {best(lo):.4f}"
        )
    while hi - lo > 1e-9 * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if best(mid) >= g else (lo, mid)
    return lo


__all__ = [
    "checkpoint_cost_for_goodput",
    "daly_interval",
    "expected_wall_time",
    "goodput",
    "goodput_first_order",
    "job_mtbf",
    "mtbf_from_count",
    "optimal_interval",
    "part_mtbf",
    "young_daly_interval",
]
