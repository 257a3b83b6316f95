"""The jitter of one worker's compute time per step: four distributions.

Every worker's compute time per step has mean ``base_s`` and standard deviation
``cv * base_s`` (before negative draws are clipped to zero):

* ``"none"``: exactly ``base_s``;
* ``"normal"``: ``max(0, base_s + cv * base_s * Z)``;
* ``"lognormal"``: ``exp(mu + s * Z)`` with ``s**2 = ln(1 + cv**2)``;
* ``"exponential"``: ``base_s * (1 - cv) + cv * base_s * E``, ``E`` exponential
  with mean 1 (a fixed part plus a memoryless tail).

``cv`` is at most 1: a worker whose step time varies by more than its mean is
broken, not jittery. ``compute_time_cdf`` is the distribution function that
``cl.models.stragglers`` integrates; the simulation in ``cl.stragglers.sim``
draws from the same four.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from clusterlab.core.validate import check_choice, check_float

JITTERS = ("none", "normal", "lognormal", "exponential")


#: Tail mass ignored at each end of a worker's distribution (below 1e-15 / N).
_TAIL = 1e-20


_GRID = 2001


#: Below this coefficient of variation a worker's time counts as fixed.
_STEADY_CV = 1e-9


_erfc = np.frompyfunc(math.erfc, 1, 1)


def _check_jitter(jitter: str, cv: float) -> float:
    check_choice("jitter", jitter, JITTERS)
    return check_float("cv", cv, 0.0, 1.0)


@functools.lru_cache(maxsize=1)
def _phi_table() -> tuple[np.ndarray, np.ndarray]:
    z = np.linspace(-12.0, 12.0, 24001)
    return z, 0.5 * _erfc(-z / math.sqrt(2.0)).astype(float)


def _phi(z) -> np.ndarray:
    """The standard normal distribution function, elementwise.

    Interpolated in a table of ``math.erfc`` with steps of 0.001 (NumPy has no
    erf), which keeps the relative error of the upper tail below 1e-5 out to
    z = 5: far below what the order statistics need, and fast in sweeps.
    """
    zs, table = _phi_table()
    return np.interp(z, zs, table)


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
    if jitter == "none" or cv < _STEADY_CV:
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
    z = np.maximum(t - shift, 0.0) / scale  # clipped: no overflow below the shift
    return np.where(t <= shift, 0.0, -np.expm1(-z))


def _support(base_s: float, jitter: str, cv: float, tail: float):
    """An interval outside which each tail holds less than ``tail`` probability."""
    if jitter == "none" or cv < _STEADY_CV:
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


@functools.lru_cache(maxsize=64)
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
    # Keep the stretch where the CDF is neither 0 nor 1 to double precision.
    first = max(0, int(np.searchsorted(values, 1e-30)) - 1)
    last = min(n, int(np.searchsorted(values, 1.0 - 1e-16)) + 1)
    return sum_edges[first : last + 1], np.minimum(values[first : last + 1], 1.0)


__all__ = ["JITTERS", "compute_time_cdf"]
