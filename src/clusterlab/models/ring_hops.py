"""A ring whose hops differ: the alpha-beta model with one cost per hop.

Every step of a ring all-reduce moves one chunk of ``S / n`` bytes over every
hop at once, and no rank can start step ``s + 1`` before the chunk of step
``s`` has reached it. So each of the ``2 (n - 1)`` steps lasts as long as its
slowest hop, and with hop ``i`` costing ``alpha_i + (S / n) / beta_i``:

    T = 2 (n - 1) * max_i (alpha_i + (S / n) / beta_i)

A script that assumes every pair of GPUs costs the same, in effect prices the
ring at the *average* hop (``hop="mean"`` here); one slow hop, a pair of GPUs
on different sockets or a TP group that leaves its node, then makes it run
slower than planned by nearly the gap between that hop and the others. The
ring lab measures both on a real ring with one hop slowed.
"""

from __future__ import annotations

import numpy as np

from clusterlab.core.validate import check_choice, check_float, check_int

_RULES = ("slowest", "mean")


def _per_hop(name: str, values, n: int | None, low: float) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(values, dtype=float))
    if arr.ndim != 1 or (n is not None and len(arr) not in (1, n)):
        raise ValueError(f"{name}={values!r} must be one value or one per hop ({n})")
    if np.any(~(arr >= low)) or np.any(np.isnan(arr)):
        raise ValueError(f"{name}={values!r} must be >= {low} (inf allowed)")
    return arr


def hop_step_s(nbytes: float, n: int, hop_alpha_s, hop_Bps) -> np.ndarray:
    """Seconds each hop takes to carry one chunk of a ring all-reduce.

    Args:
        nbytes: bytes of the tensor all-reduced, >= 0.
        n: ranks (and hops) in the ring, >= 2.
        hop_alpha_s: latency per message of each hop, s, >= 0 (one value for
            all, or ``n`` values; hop ``i`` runs from rank ``i`` to ``i + 1``).
        hop_Bps: bandwidth of each hop, bytes/s, > 0 (``inf``: a hop whose
            cost is all in its latency).

    Returns:
        ``n`` seconds: ``alpha_i + (nbytes / n) / Bps_i``.
    """
    nbytes = check_float("nbytes", nbytes, 0.0)
    n = check_int("n", n, 2)
    alpha = _per_hop("hop_alpha_s", hop_alpha_s, n, 0.0)
    bps = _per_hop("hop_Bps", hop_Bps, n, np.finfo(float).tiny)
    return np.broadcast_to(alpha + (nbytes / n) / bps, (n,)).copy()


def ring_time_hops(nbytes: float, hop_alpha_s, hop_Bps, *, hop="slowest") -> float:
    """Seconds of a ring all-reduce over hops of different cost.

    Args:
        nbytes: bytes of the tensor all-reduced, >= 0.
        hop_alpha_s: one latency per hop, s (its length is the ring's size,
            >= 2; see ``hop_step_s``).
        hop_Bps: one bandwidth per hop, bytes/s (or one value for all).
        hop: ``"slowest"`` (the ring waits for its slowest hop at every step:
            the model) or ``"mean"`` (every hop priced at the average: what a
            uniform-cost script assumes).

    Returns:
        ``2 (n - 1)`` times the slowest (or the mean) hop's step, seconds.
    """
    check_choice("hop", hop, _RULES)
    alpha = _per_hop("hop_alpha_s", hop_alpha_s, None, 0.0)
    n = len(alpha)
    if n < 2:
        raise ValueError(f"hop_alpha_s={hop_alpha_s!r} needs one value per hop, >= 2")
    steps = hop_step_s(nbytes, n, alpha, hop_Bps)
    per_step = steps.max() if hop == "slowest" else steps.mean()
    return float(2 * (n - 1) * per_step)


__all__ = ["hop_step_s", "ring_time_hops"]
