"""Stragglers: a synchronous step lasts as long as its slowest worker.

A data-parallel step ends in an all-reduce, and an all-reduce is a barrier, so the
step takes the *maximum* of the workers' compute times, plus the all-reduce. This
module gives the expected step time without simulation: the maximum of ``N``
independent times ``X_i`` has the distribution function ``P(max <= t) = prod F_i(t)``,
and a non-negative variable has mean ``E[T] = integral_0^inf P(T > t) dt``. With
``b`` backup workers the step waits only for the fastest ``N - b`` (Chen et al. 2016),
so the same integral runs over the ``(N - b)``-th order statistic instead.

Each worker's compute time follows one of the distributions of
``cl.models.jitter`` (``none``, ``normal``, ``lognormal``, ``exponential``), with
mean ``base_s`` and coefficient of variation ``cv``; ``slow_workers`` of them are
``slow_factor`` times slower on every step.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from clusterlab.core.validate import check_choice, check_float, check_int
from clusterlab.models.jitter import (
    _GRID,
    _STEADY_CV,
    _TAIL,
    JITTERS,
    _check_jitter,
    _sum_cdf,
    _support,
    compute_time_cdf,
)


def _binom_upto(n: int, q: np.ndarray, mmax: int) -> np.ndarray:
    """P(exactly m of n independent workers still run), m = 0..mmax, rows = m.

    Built up from m = 0 by the ratio of successive binomial terms, which costs a
    multiplication per row instead of a logarithm and an exponential.
    """
    q = np.asarray(q, dtype=float)
    out = np.empty((mmax + 1, q.size))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out[0] = np.exp(n * np.log1p(-q))
        odds = q / (1.0 - q)
        for m in range(mmax):
            out[m + 1] = out[m] * odds * ((n - m) / (m + 1))
    certain = q >= 1.0  # every worker still runs: the ratio above is 0 * inf
    out[:, certain] = 0.0
    if n <= mmax:
        out[n, certain] = 1.0
    return out


def _order_stat_cdf(f_fast, n_fast: int, f_slow, n_slow: int, backups: int):
    """P(the (N - backups)-th fastest worker is done by t): at most ``backups`` run."""
    if backups == 0:
        return f_fast**n_fast * f_slow**n_slow
    fast = np.cumsum(_binom_upto(n_fast, 1 - f_fast, min(backups, n_fast)), axis=0)
    fast = np.vstack([fast, np.repeat(fast[-1:], backups + 1 - len(fast), axis=0)])
    slow = _binom_upto(n_slow, 1 - f_slow, min(backups, n_slow))
    return sum(slow[j] * fast[backups - j] for j in range(len(slow)))


def expected_step_time(
    n_workers: int,
    base_s: float,
    jitter: str = "normal",
    cv: float = 0.1,
    slow_workers: int = 0,
    slow_factor: float = 1.0,
    backup_workers: int = 0,
    *,
    sync_period: int = 1,
    allreduce_s: float = 0.0,
) -> float:
    """Expected time per step of synchronous data parallelism with stragglers.

    Args:
        n_workers: workers that join each all-reduce, in [1, 65536].
        base_s: mean compute time of one worker for one step, seconds, > 0.
        jitter: distribution of the compute time (see the module docstring).
        cv: its coefficient of variation, in [0, 1].
        slow_workers: workers that are always slower, in [0, n_workers].
        slow_factor: how many times slower they are, in [1, 100].
        backup_workers: the step waits only for the fastest
            ``n_workers - backup_workers``; in [0, n_workers - 1].
        sync_period: local steps between synchronisations (local SGD, or gradient
            accumulation over that many micro-batches), in [1, 64].
        allreduce_s: seconds each synchronisation itself costs, >= 0.

    Returns:
        Expected seconds per step: the expected time of one round of
        ``sync_period`` steps plus its all-reduce, divided by ``sync_period``.
    """
    n = check_int("n_workers", n_workers, 1, 65536)
    base_s = check_float("base_s", base_s, 0.0, low_inclusive=False)
    cv = _check_jitter(jitter, cv)
    s = check_int("slow_workers", slow_workers, 0, n)
    f = check_float("slow_factor", slow_factor, 1.0, 100.0)
    b = check_int("backup_workers", backup_workers, 0, n - 1)
    h = check_int("sync_period", sync_period, 1, 64)
    allreduce_s = check_float("allreduce_s", allreduce_s, 0.0)
    if jitter == "none" or cv < _STEADY_CV:
        # The (n - b)-th fastest is a slow worker exactly when more than b are slow.
        round_s = h * base_s * (f if s > b else 1.0)
        return (round_s + allreduce_s) / h
    if h == 1:
        lo, hi = _support(base_s, jitter, cv, _TAIL)
        # Log-spaced points follow a log-normal's long tail without losing its bulk.
        space = np.geomspace if jitter == "lognormal" else np.linspace
        grid = space(lo, hi, _GRID)
        cdf = lambda t: compute_time_cdf(t, base_s, jitter, cv)  # noqa: E731
    else:
        edges, values = _sum_cdf(base_s, jitter, cv, h, _TAIL)
        grid, space = edges, np.linspace
        cdf = lambda t: np.interp(t, edges, values, left=0.0, right=1.0)  # noqa: E731
    # Fine points where each group switches from running to done; between the
    # two groups the integrand is constant, which the trapezoid rule gets exactly.
    if s > 0 and f > 1.0:
        if f * grid[0] >= grid[-1]:
            grid = np.concatenate([grid, f * grid])
        else:  # the two groups overlap: one grid as fine as before, but longer
            count = math.ceil(len(grid) * (f * grid[-1] - grid[0]) / np.ptp(grid))
            grid = space(grid[0], f * grid[-1], count)
    done = _order_stat_cdf(cdf(grid), n - s, cdf(grid / f), s, b)
    round_s = grid[0] + np.trapezoid(1.0 - done, grid)
    return float((round_s + allreduce_s) / h)


def gaussian_max_asymptote(n_workers) -> np.ndarray | float:
    """``sqrt(2 ln N)``: the leading growth of the mean of the largest of N normals.

    E[max of N standard normals] approaches it slowly from below (David & Nagaraja
    2003): for N = 1024 the exact value is 3.25 against sqrt(2 ln 1024) = 3.72.
    """
    n = np.asarray(n_workers, dtype=float)
    if np.any(n < 1):
        raise ValueError(f"n_workers={n_workers!r} must be >= 1")
    out = np.sqrt(2 * np.log(n))
    return float(out) if out.ndim == 0 else out


def jitter_cv_for_step_ratio(
    n_workers: int, step_ratio: float, jitter: str = "normal"
) -> float:
    """The jitter (cv) at which the expected step is ``step_ratio`` times ``base_s``.

    Args:
        n_workers: workers, in [2, 65536].
        step_ratio: expected step time over the mean compute time, > 1.
        jitter: ``"normal"``, ``"lognormal"`` or ``"exponential"``.

    Returns:
        The coefficient of variation, found by bisection to 1e-6.

    Raises:
        ValueError: if no cv in the allowed range reaches ``step_ratio``.
    """
    n = check_int("n_workers", n_workers, 2, 65536)
    ratio = check_float("step_ratio", step_ratio, 1.0, low_inclusive=False)
    check_choice("jitter", jitter, JITTERS[1:])
    lo, hi = 0.0, 1.0
    if expected_step_time(n, 1.0, jitter, hi) < ratio:
        raise ValueError(
            f"step_ratio={ratio} is out of reach for {jitter} jitter on {n} workers:"
            f" even cv={hi} gives {expected_step_time(n, 1.0, jitter, hi):.3f}"
        )
    while hi - lo > 1e-6:
        mid = (lo + hi) / 2
        lo, hi = (
            (mid, hi) if expected_step_time(n, 1.0, jitter, mid) < ratio else (lo, mid)
        )
    return (lo + hi) / 2


#: The mitigations of ``step_time_sweep``: keyword arguments per number of workers.
SWEEP_MITIGATIONS = {
    "none": lambda n: {},
    "backup workers (5%)": lambda n: {"backup_workers": n // 20},
    "local SGD (H = 4)": lambda n: {"sync_period": 4},
}


def step_time_sweep(
    n_values=tuple(2**k for k in range(11)),
    jitters=("normal", "lognormal", "exponential"),
    cvs=(0.02, 0.05, 0.1, 0.2, 0.4),
    slow_factors=(1.0, 1.003, 1.5),
) -> pd.DataFrame:
    """Expected step time over a grid of scenarios, for charts with sliders.

    One worker is slow by each factor in ``slow_factors``; each mitigation of
    ``SWEEP_MITIGATIONS`` is applied (backup workers: ``N // 20``, so none below
    20 workers). Times are relative to the mean compute time (``base_s = 1``).

    Returns:
        A DataFrame with columns ``n_workers, jitter, cv, slow_factor,
        mitigation, step_ratio`` (expected step over mean compute time) and
        ``throughput_loss`` (``1 - 1 / step_ratio``).
    """
    rows = []
    for jitter in jitters:
        for cv in cvs:
            for f in slow_factors:
                for name, extra in SWEEP_MITIGATIONS.items():
                    for n in n_values:
                        ratio = expected_step_time(
                            n, 1.0, jitter, cv, int(f > 1), f, **extra(n)
                        )
                        rows.append((n, jitter, cv, f, name, ratio))
    df = pd.DataFrame(
        rows,
        columns=[
            "n_workers",
            "jitter",
            "cv",
            "slow_factor",
            "mitigation",
            "step_ratio",
        ],
    )
    return df.assign(throughput_loss=1 - 1 / df["step_ratio"])


def max_growth_table(n_values=tuple(2**k for k in range(11))) -> pd.DataFrame:
    """How far the slowest of N workers lies above the mean, in standard deviations.

    Rows for normal noise (cv 0.1), log-normal noise (cv 0.5), exponential
    noise (any cv: the answer is ``H_N - 1``) and the leading term ``sqrt(2 ln N)``.

    Returns:
        A DataFrame with columns ``n_workers, series, excess_sd``.
    """
    rows = []
    for label, jitter, cv in (
        ("normal", "normal", 0.1),
        ("log-normal, cv 0.5", "lognormal", 0.5),
        ("exponential", "exponential", 0.5),
    ):
        for n in n_values:
            excess = (expected_step_time(n, 1.0, jitter, cv) - 1.0) / cv
            rows.append((n, label, excess))
    for n in n_values:
        rows.append((n, "√(2 ln N), leading term", gaussian_max_asymptote(n)))
    return pd.DataFrame(rows, columns=["n_workers", "series", "excess_sd"])


__all__ = [
    "expected_step_time",
    "gaussian_max_asymptote",
    "jitter_cv_for_step_ratio",
    "max_growth_table",
    "step_time_sweep",
]
