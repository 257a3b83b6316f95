"""Clock skew over a grid of drifts and sync intervals, for charts with sliders.

``skew_sweep`` runs ``cl.sim.clocks.simulate`` for every combination and keeps
the largest skew in each window of time, so a page can carry every run and let
its sliders pick one with no kernel behind it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._validate import check_int
from .clocks import PROTOCOLS, ClockParams, simulate, skew

__all__ = ["skew_sweep"]


def skew_sweep(
    max_drifts_ppm,
    sync_intervals_s,
    protocols=PROTOCOLS,
    *,
    base: ClockParams | None = None,
    bins: int = 40,
    seed: int = 0,
) -> pd.DataFrame:
    """Skew over time for every combination, binned to keep the table small.

    Each run's samples are grouped into ``bins`` equal windows of time and the
    largest skew in each window is kept, so a sawtooth between syncs is not
    lost by sampling. With no protocol the sync interval changes nothing, so
    that run is done once per drift and repeated for each interval.

    Args:
        max_drifts_ppm: values for ``max_drift_ppm``.
        sync_intervals_s: values for ``sync_interval_s``.
        protocols: protocols to run.
        base: the other parameters (default ``ClockParams()``).
        bins: windows per run, in [2, 1000].
        seed: one seed for every run, so runs differ only by their parameters.

    Returns:
        A DataFrame with ``max_drift_ppm``, ``sync_interval_s``, ``protocol``,
        ``time_s`` (end of the window) and ``skew_s`` (largest in the window).
    """
    base = base or ClockParams()
    check_int("bins", bins, 2, 1000)
    frames = []
    for drift in max_drifts_ppm:
        for proto in protocols:
            intervals = [base.sync_interval_s] if proto == "none" else sync_intervals_s
            for interval in intervals:
                p = ClockParams(
                    **{
                        **base.__dict__,
                        "max_drift_ppm": float(drift),
                        "sync_interval_s": float(interval),
                        "protocol": proto,
                    }
                )
                s = skew(simulate(p, seed))
                edges = np.linspace(0, p.duration_s, bins + 1)
                window = np.clip(np.searchsorted(edges, s["time_s"]), 1, bins)
                s = s.groupby(window)["skew_s"].max()
                for iv in sync_intervals_s if proto == "none" else [interval]:
                    frames.append(
                        pd.DataFrame(
                            {
                                "max_drift_ppm": float(drift),
                                "sync_interval_s": float(iv),
                                "protocol": proto,
                                "time_s": edges[s.index.to_numpy()],
                                "skew_s": s.to_numpy(),
                            }
                        )
                    )
    return pd.concat(frames, ignore_index=True)
