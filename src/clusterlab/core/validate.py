"""Argument checks shared by the whole package.

Every public function checks its inputs and raises ``ValueError`` with a
message that names the argument, the value it got and the range it accepts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np


def _plain(value):
    """NumPy scalars print as np.int64(2); show them as plain Python numbers."""
    return value.item() if isinstance(value, np.generic) else value


def check_int(name: str, value, low: int, high: int | None = None) -> int:
    """Return ``value`` if it is an int in ``[low, high]``, else raise ValueError."""
    rng = f"[{low}, {high}]" if high is not None else f">= {low}"
    value = _plain(value)
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{name}={value!r} must be an integer {rng}")
    if value < low or (high is not None and value > high):
        raise ValueError(f"{name}={value!r} is out of range: allowed {rng}")
    return int(value)


def check_float(
    name: str,
    value,
    low: float | None = None,
    high: float | None = None,
    *,
    low_inclusive: bool = True,
) -> float:
    """Return ``value`` as a float if it is finite and inside the range."""
    value = _plain(value)
    lo = "(" if not low_inclusive else "["
    rng = f"{lo}{'-inf' if low is None else low}, {'inf' if high is None else high}]"
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r} must be a number in {rng}") from None
    if isinstance(value, bool) or not math.isfinite(x):
        raise ValueError(f"{name}={value!r} must be a finite number in {rng}")
    too_low = low is not None and (x < low if low_inclusive else x <= low)
    if too_low or (high is not None and x > high):
        raise ValueError(f"{name}={value!r} is out of range: allowed {rng}")
    return x


def check_choice(name: str, value, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name}={value!r} is not allowed: choose one of {allowed}")
    return value
