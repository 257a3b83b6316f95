"""The alpha–beta (Hockney) model of sending a message.

A message of ``S`` bytes costs a fixed start-up time ``alpha`` (seconds) plus
``S / beta`` seconds at bandwidth ``beta`` (bytes/s). Every collective-cost
formula in the book is built from this one line.
"""

from __future__ import annotations

import numpy as np

from .._validate import check_float


def alpha_beta_time(nbytes, alpha_s: float, beta_Bps: float):
    """Time to send ``nbytes`` under the alpha–beta model: ``alpha + nbytes / beta``.

    Args:
        nbytes: message size in bytes (a number or an array), >= 0.
        alpha_s: start-up latency in seconds, >= 0.
        beta_Bps: bandwidth in bytes per second, > 0 (``inf`` allowed).

    Returns:
        Seconds, with the shape of ``nbytes``.
    """
    alpha_s = check_float("alpha_s", alpha_s, 0.0)
    try:
        beta = float(beta_Bps)
    except (TypeError, ValueError):
        raise ValueError(f"beta_Bps={beta_Bps!r} must be a number > 0") from None
    if not beta > 0:
        raise ValueError(f"beta_Bps={beta_Bps!r} is out of range: allowed (0, inf]")
    size = np.asarray(nbytes, dtype=float)
    if np.any(~np.isfinite(size)) or np.any(size < 0):
        raise ValueError(f"nbytes={nbytes!r} must be finite and >= 0 bytes")
    t = alpha_s + size / beta
    return float(t) if t.ndim == 0 else t
