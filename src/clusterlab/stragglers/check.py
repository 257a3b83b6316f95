"""Exercise check: the expected maximum of n independent times."""

from __future__ import annotations

import math

import numpy as np

from clusterlab.core.checks import not_attempted, passed


def _cases():
    """(name, cdf, lo, hi, mean of one, {n: exact E[max of n]})."""
    yield (
        "uniform on [2 s, 3 s]",
        lambda t: np.clip(np.asarray(t) - 2.0, 0.0, 1.0),
        2.0,
        3.0,
        2.5,
        {n: 2.0 + n / (n + 1) for n in (1, 2, 10, 1000)},
    )
    harmonic = {n: sum(1 / k for k in range(1, n + 1)) for n in (1, 2, 10, 1000)}
    yield (
        "1 s plus an exponential with mean 1 s",
        lambda t: np.where(np.asarray(t) < 1.0, 0.0, -np.expm1(1.0 - np.asarray(t))),
        1.0,
        60.0,
        2.0,
        {n: 1.0 + h for n, h in harmonic.items()},
    )


def _hint(got, exact, mean, lo, n):
    if math.isclose(got, mean, rel_tol=1e-3):
        return (
            "that is the mean of a single worker: the maximum is at most t only "
            "when all n are, so P(max <= t) = cdf(t)**n"
        )
    if math.isclose(got + lo, exact, rel_tol=1e-3):
        return "the integral covers only [lo_s, hi_s]: add lo_s to it"
    if got < mean:
        return (
            "it is below one worker's mean, so it cannot be a maximum: integrate "
            "P(max > t) = 1 - cdf(t)**n, not P(max <= t)"
        )
    return "use E[T] = lo_s + integral from lo_s to hi_s of (1 - cdf(t)**n) dt"


def expected_max_of_n(fn) -> bool:
    """Check the exercise against exact answers for two distributions."""
    name = "expected_max_of_n"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function expected_max_of_n")
    for label, cdf, lo, hi, mean, exact in _cases():
        for n, want in exact.items():
            try:
                got = float(fn(cdf, n, lo, hi))
            except NotImplementedError:
                return not_attempted(name)
            if not math.isclose(got, want, rel_tol=1e-3):
                raise AssertionError(
                    f"{name}: with n={n}, each time {label}, you returned "
                    f"{got:.4f} s but the expected maximum is {want:.4f} s; "
                    + _hint(got, want, mean, lo, n)
                )
    return passed(name, "uniform and exponential times, n from 1 to 1000")


__all__ = ["expected_max_of_n"]
