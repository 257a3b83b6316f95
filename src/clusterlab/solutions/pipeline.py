"""Reference solution: the fewest micro-batches for a pipeline bubble target."""

from __future__ import annotations

import math

__all__ = ["min_microbatches"]


def min_microbatches(stages: int, max_bubble: float) -> int:
    """Fewest micro-batches m with (p - 1) / (m + p - 1) <= ``max_bubble``.

    Solving the bubble formula for m gives m >= (p - 1)(1 - x) / x; m is a
    whole number of micro-batches, so round up (and at least 1).

    Args:
        stages: pipeline stages p, >= 1.
        max_bubble: largest idle share of the step allowed, in (0, 1).

    Returns:
        The smallest whole m that meets the target.
    """
    p, x = stages, max_bubble
    # The small slack keeps an exact answer (m = 9.0) from rounding up to 10.
    return max(1, math.ceil((p - 1) * (1 - x) / x - 1e-9))
