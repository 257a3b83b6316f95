"""The example's exercise check: the reader's total of a list of values."""

from __future__ import annotations

from clusterlab.core.checks import not_attempted, passed


def total_of(fn) -> bool:
    """Check ``fn(values) -> float``, the sum of ``values``; a hint when it is wrong."""
    cases = [[], [1.0], [0.5, 0.25, 0.25]]
    try:
        got = [fn(list(c)) for c in cases]
    except NotImplementedError:
        return not_attempted("total_of")
    want = [sum(c) for c in cases]
    for case, g, x in zip(cases, got, want, strict=True):
        if abs(g - x) > 1e-12:
            raise AssertionError(f"total_of({case}) gave {g}, not {x}: add every value")
    return passed("total_of", f"{len(cases)} lists summed")
