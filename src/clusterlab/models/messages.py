"""Message passing: the alpha–beta model's curve over a range of message sizes.

``cl.models.collectives.alpha_beta_time`` prices one message of ``S`` bytes as
``alpha + S / beta``; this module samples it on a log grid of sizes, as the
DataFrame the message-passing charts draw beside the measured points.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from clusterlab.core.validate import check_float, check_int
from clusterlab.models.collectives import alpha_beta_time


def alpha_beta_curve(
    alpha_s: float, beta_Bps: float, lo_bytes: float, hi_bytes: float, points: int = 60
) -> pd.DataFrame:
    """The alpha–beta model sampled on a log grid of message sizes.

    Args:
        alpha_s: start-up latency, seconds (>= 0).
        beta_Bps: bandwidth, bytes per second (> 0; ``inf`` allowed).
        lo_bytes, hi_bytes: the smallest and largest size, bytes (0 < lo <= hi).
        points: sizes on the grid, in [2, 10000].

    Returns:
        One row per size: ``size_bytes``, ``time_s`` (the model's seconds),
        ``series`` ("alpha–beta model"), and the ``alpha_s`` and ``beta_Bps``
        it was drawn with.
    """
    lo = check_float("lo_bytes", lo_bytes, 0.0, low_inclusive=False)
    hi = check_float("hi_bytes", hi_bytes, lo)
    n = check_int("points", points, 2, 10_000)
    sizes = np.geomspace(lo, hi, n)
    return pd.DataFrame(
        {
            "size_bytes": sizes,
            "time_s": alpha_beta_time(sizes, alpha_s, beta_Bps),
            "series": "alpha–beta model",
            "alpha_s": float(alpha_s),
            "beta_Bps": float(beta_Bps),
        }
    )


__all__ = ["alpha_beta_curve"]
