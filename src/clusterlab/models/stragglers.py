"""Stragglers: a synchronous step lasts as long as its slowest worker.

A data-parallel step ends in an all-reduce, and an all-reduce is a barrier, so the
step takes the *maximum* of the workers' compute times, plus the all-reduce. This
module gives the expected step time without simulation: the maximum of ``N``
independent times ``X_i`` has the distribution function ``P(max <= t) = prod F_i(t)``,
and a non-negative variable has mean ``E[T] = integral_0^inf P(T > t) dt``. With
``b`` backup workers the step waits only for the fastest ``N - b`` (Chen et al. 2016),
so the same integral runs over the ``(N - b)``-th order statistic instead.

Every worker's compute time per step has mean ``base_s`` and standard deviation
``cv * base_s`` (before negative draws are clipped to zero):

* ``"none"``: exactly ``base_s``;
* ``"normal"``: ``max(0, base_s + cv * base_s * Z)``;
* ``"lognormal"``: ``exp(mu + s * Z)`` with ``s**2 = ln(1 + cv**2)``;
* ``"exponential"``: ``base_s * (1 - cv) + cv * base_s * E``, ``E`` exponential
  with mean 1 (a fixed part plus a memoryless tail).

``cv`` is at most 1: a worker whose step time varies by more than its mean is
broken, not jittery.

``slow_workers`` of them are ``slow_factor`` times slower on every step.
"""

from __future__ import annotations

import math

import numpy as np

from .._validate import check_choice, check_float, check_int

__all__ = [
    "JITTERS",
    "compute_time_cdf",
    "expected_step_time",
    "gaussian_max_asymptote",
    "jitter_cv_for_step_ratio",
]

JITTERS = ("none", "normal", "lognormal", "exponential")
#: Tail mass ignored at each end of a worker's distribution, divided by N.
_TAIL = 1e-15
_GRID = 2001
_erfc = np.frompyfunc(math.erfc, 1, 1)


def _check_jitter(jitter: str, cv: float) -> float:
    check_choice("jitter", jitter, JITTERS)
    return check_float("cv", cv, 0.0, 1.0)


def _phi(z) -> np.ndarray:
    """The standard normal distribution function, elementwise."""
    return 0.5 * _erfc(-np.asarray(z, dtype=float) / math.sqrt(2.0)).astype(float)


def compute_time_cdf(t, base_s: float, jitter: str = "normal", cv: float = 0.1):
    """P(one worker's compute time for one step <= t).

    Args:
        t: seconds (a number or an array).
        base_s: mean compute time per step, seconds, > 0.
        jitter: ``"none"``, ``"normal"``, ``"lognormal"`` or ``"exponential"``.
        cv: coefficient of variation (standard deviation / mean), in [0, 1].

    Returns:
        Probabilities in [0, 1], with the shape of ``t``.
    """
    base_s = check_float("base_s", base_s, 0.0, low_inclusive=False)
    cv = _check_jitter(jitter, cv)
    t = np.asarray(t, dtype=float)
    if jitter == "none" or cv == 0.0:
        return (t >= base_s).astype(float)
    if jitter == "normal":
        # Clipping at zero puts the negative mass at t = 0 exactly.
        return np.where(t < 0, 0.0, _phi((t - base_s) / (cv * base_s)))
    if jitter == "lognormal":
        s = math.sqrt(math.log1p(cv * cv))
        mu = math.log(base_s) - s * s / 2
        logt = np.log(np.maximum(t, 1e-300))
        return np.where(t <= 0, 0.0, _phi((logt - mu) / s))
    shift, scale = base_s * (1 - cv), base_s * cv
    return np.where(t <= shift, 0.0, -np.expm1(-(t - shift) / scale))


def _support(base_s: float, jitter: str, cv: float, tail: float):
    """An interval outside which each tail holds less than ``tail`` probability."""
    if jitter == "none" or cv == 0.0:
        return base_s, base_s
    z = math.sqrt(2 * math.log(1 / tail))  # normal tail above z is < exp(-z^2/2)
    if jitter == "normal":
        sd = cv * base_s
        return max(0.0, base_s - z * sd), base_s + z * sd
    if jitter == "lognormal":
        s = math.sqrt(math.log1p(cv * cv))
        mu = math.log(base_s) - s * s / 2
        return math.exp(mu - z * s), math.exp(mu + z * s)
    shift, scale = base_s * (1 - cv), base_s * cv
    return shift, shift + scale * math.log(1 / tail)


def _sum_cdf(base_s: float, jitter: str, cv: float, steps: int, tail: float):
    """Grid and CDF of the sum of ``steps`` i.i.d. compute times (local SGD rounds).

    The one-step distribution is cut into cells and convolved ``steps`` times by
    FFT; the mass of each cell is spread evenly over it, so the CDF is piecewise
    linear between the returned points.
    """
    lo, hi = _support(base_s, jitter, cv, tail)
    # Cells of at most a 40th of a standard deviation, however long the tail.
    cells = max(_GRID, math.ceil((hi - lo) / (cv * base_s / 40)))
    dt = (hi - lo) / (cells - 1)
    edges = lo - dt / 2 + dt * np.arange(cells + 1)
    cdf = compute_time_cdf(edges, base_s, jitter, cv)
    cdf[0], cdf[-1] = 0.0, 1.0  # fold the clipped tails into the end cells
    pmf = np.diff(cdf)
    n = steps * (cells - 1) + 1
    size = 1 << (n - 1).bit_length()
    summed = np.fft.irfft(np.fft.rfft(pmf, size) ** steps, size)[:n]
    summed = np.clip(summed, 0.0, None)
    summed /= summed.sum()
    sum_edges = steps * lo - dt / 2 + dt * np.arange(n + 1)
    values = np.concatenate([[0.0], np.cumsum(summed)])
    # Past the point where the CDF is 1 to double precision nothing is left.
    last = min(n, int(np.searchsorted(values, 1.0 - 1e-16)) + 1)
    return sum_edges[: last + 1], np.minimum(values[: last + 1], 1.0)


def _binom_upto(n: int, q: np.ndarray, mmax: int) -> np.ndarray:
    """P(exactly m of n independent workers still run), m = 0..mmax, rows = m."""
    m = np.arange(mmax + 1)[:, None]
    logc = np.array(
        [
            math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
            for k in range(mmax + 1)
        ]
    )[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        logp = np.where(m > 0, m * np.log(q), 0.0)
        logp = logp + np.where(n - m > 0, (n - m) * np.log1p(-q), 0.0)
    return np.exp(logc + np.nan_to_num(logp, nan=-np.inf))


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
    if jitter == "none" or cv == 0.0:
        # The (n - b)-th fastest is a slow worker exactly when more than b are slow.
        round_s = h * base_s * (f if s > b else 1.0)
        return (round_s + allreduce_s) / h
    tail = _TAIL / n
    if h == 1:
        lo, hi = _support(base_s, jitter, cv, tail)
        # Log-spaced points follow a log-normal's long tail without losing its bulk.
        space = np.geomspace if jitter == "lognormal" else np.linspace
        grid = space(lo, hi, _GRID)
        cdf = lambda t: compute_time_cdf(t, base_s, jitter, cv)  # noqa: E731
    else:
        edges, values = _sum_cdf(base_s, jitter, cv, h, tail)
        grid = edges
        cdf = lambda t: np.interp(t, edges, values, left=0.0, right=1.0)  # noqa: E731
    # Fine points where each group switches from running to done; between the
    # two groups the integrand is constant, which the trapezoid rule gets exactly.
    if s > 0 and f > 1.0:
        grid = np.union1d(grid, f * grid)
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
