"""Exercise check: the fewest micro-batches that keep the pipeline bubble small."""

from __future__ import annotations

from clusterlab.core.checks import not_attempted, passed
from clusterlab.models.pipeline import bubble_fraction

#: (stages, largest bubble) cases: exact answers, round-ups, and p = 1.
_CASES = [(4, 0.25), (4, 0.1), (4, 0.05), (8, 0.2), (2, 0.5), (1, 0.01), (16, 0.3)]


def _fewest(p: int, x: float) -> int:
    # An independent answer: walk m up until the bubble model meets the target.
    m = 1
    while bubble_fraction(p, m) > x + 1e-12:
        m += 1
    return m


def _hint(p: int, x: float, got: int, want: int) -> str:
    if got > want and got == _ideal_form(p, x):
        return (
            "that solves (p - 1) / m <= target, the bubble over the ideal time; "
            "the target here is the share of the whole step, (p - 1) / (m + p - 1)"
        )
    if got == want - 1:
        return "one too few: round m up, a fraction of a micro-batch does not run"
    if got == want + 1:
        return f"m = {want} already meets the target; check how you round"
    return "solve (p - 1) / (m + p - 1) <= target for m, then round up to a whole m"


def _ideal_form(p: int, x: float) -> int:
    m = 1
    while (p - 1) / m > x + 1e-12:
        m += 1
    return m


def min_microbatches(fn) -> bool:
    """Check the exercise: ``fn(stages, max_bubble)`` -> fewest micro-batches."""
    name = "min_microbatches"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function min_microbatches")
    for p, x in _CASES:
        try:
            got = fn(p, x)
        except NotImplementedError:
            return not_attempted(name)
        want = _fewest(p, x)
        if isinstance(got, float) and got.is_integer():
            got = int(got)
        if not isinstance(got, int) or isinstance(got, bool):
            raise AssertionError(
                f"{name}({p}, {x}) returned {got!r}; return a whole number of "
                "micro-batches (an int)"
            )
        if got != want:
            raise AssertionError(
                f"{name}(stages={p}, max_bubble={x}) returned {got} but the answer "
                f"is {want} (bubble {bubble_fraction(p, want):.1%}); "
                f"{_hint(p, x, got, want)}"
            )
    return passed(name, f"{len(_CASES)} cases, from 1 to 16 stages")


__all__ = ["min_microbatches"]
