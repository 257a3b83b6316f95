"""Reference solution: the expected maximum of n independent times."""

from __future__ import annotations

import numpy as np


def expected_max_of_n(cdf, n: int, lo_s: float, hi_s: float) -> float:
    """E[max of n i.i.d. times] from their distribution function.

    The maximum is at most t only if all n times are, so P(max <= t) = cdf(t)**n;
    a variable that lies in [lo, hi] has mean lo + integral_lo^hi P(T > t) dt.
    """
    t = np.linspace(lo_s, hi_s, 20001)
    return float(lo_s + np.trapezoid(1.0 - cdf(t) ** n, t))


__all__ = ["expected_max_of_n"]
