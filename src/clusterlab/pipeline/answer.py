"""Reference solution: the fewest micro-batches for a pipeline bubble target."""

from __future__ import annotations

import math


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


def choose_schedule(
    stages: int, max_microbatches: int, max_held: float, max_interleave: int
) -> tuple[int, int]:
    """Chunks per GPU v and micro-batches m: the smallest bubble under a memory cap.

    The bubble (p - 1) / (v m + p - 1) falls as v m grows; stage 0 holds
    ``in_flight_microbatches(p, m, "1f1b", v)`` micro-batches' activations
    (p for plain 1F1B, p + (p - 1)/v interleaved, m when m = p). Among the
    (v, m) that fit, keep the largest v m, then the smaller v (fewer messages),
    then the smaller m.

    Args:
        stages: pipeline stages p; max_microbatches: the batch's limit on m.
        max_held: micro-batches' activations stage 0 may hold.
        max_interleave: the most chunks per GPU allowed.

    Returns:
        ``(v, m)``, or None when nothing fits.
    """
    from clusterlab.models.pipeline import in_flight_microbatches

    p, best = stages, None
    for v in range(1, max_interleave + 1):
        for m in range(1, max_microbatches + 1):
            if (v > 1 and m % p) or in_flight_microbatches(p, m, "1f1b", v) > max_held:
                continue
            if best is None or (-v * m, v, m) < (-best[0] * best[1], *best):
                best = (v, m)
    return best


__all__ = ["choose_schedule", "min_microbatches"]
