"""Contention and mixed clusters: how a shared fabric and a slow part cost a step.

Two ways a synchronous job loses throughput without any change to its code:
other traffic takes part of the network (:func:`contention_drop`, inverted by
:func:`network_share_for_drop`), and GPUs of different speeds share a job, so
every step waits for the slowest kind (:func:`mixed_cluster_throughput`).
Pure functions: fractions and counts in, fractions out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from clusterlab.core.validate import check_float, check_int


def contention_drop(network_share, stolen_share):
    """Fraction of throughput lost when other traffic takes part of the network.

    A step whose ``network_share`` is network-bound sees that part slowed by
    ``1 / (1 - stolen_share)``; the rest is unchanged.

    Args:
        network_share: fraction of the step that waits on the network, in [0, 1].
        stolen_share: fraction of the bandwidth other traffic takes, in [0, 1).

    Returns:
        ``1 - 1 / ((1 - f) + f / (1 - c))``: 0 means no loss.
    """
    f = np.asarray(network_share, dtype=float)
    c = np.asarray(stolen_share, dtype=float)
    if np.any(~((f >= 0) & (f <= 1))):
        raise ValueError(f"network_share={network_share!r} must be in [0, 1]")
    if np.any(~((c >= 0) & (c < 1))):
        raise ValueError(f"stolen_share={stolen_share!r} must be in [0, 1)")
    drop = 1 - 1 / ((1 - f) + f / (1 - c))
    return float(drop) if drop.ndim == 0 else drop


def network_share_for_drop(drop: float, stolen_share: float) -> float:
    """Network-bound share of a step that a throughput ``drop`` requires.

    Inverts ``contention_drop``: ``f = (1/(1 - drop) - 1) (1 - c) / c``. A result
    above 1 means that much stolen bandwidth cannot cause that drop.

    Args:
        drop: fractional throughput loss, in [0, 1).
        stolen_share: fraction of the bandwidth other traffic takes, in (0, 1).
    """
    drop = check_float("drop", drop, 0.0, 1.0)
    if drop >= 1:
        raise ValueError(f"drop={drop!r} is out of range: allowed [0, 1)")
    c = check_float("stolen_share", stolen_share, 0.0, 1.0, low_inclusive=False)
    if c >= 1:
        raise ValueError(f"stolen_share={stolen_share!r} is out of range: (0, 1)")
    return (1 / (1 - drop) - 1) * (1 - c) / c


def mixed_cluster_throughput(counts, speeds) -> dict:
    """Throughput of a synchronous job on mixed GPUs: the slowest sets the pace.

    Args:
        counts: GPUs of each kind (ints >= 0, at least one > 0).
        speeds: relative work per second of each kind (> 0), same length.

    Returns:
        ``synchronous`` (every GPU works at the slowest kind's pace),
        ``balanced`` (work split in proportion to speed: the sum of speeds),
        ``lost_share`` (1 - synchronous / balanced) and ``idle_share_fastest``
        (the fraction of each step the fastest kind waits).
    """
    counts = [check_int("counts", c, 0) for c in counts]
    speeds = [check_float("speeds", s, 0.0, low_inclusive=False) for s in speeds]
    if len(counts) != len(speeds) or not any(counts):
        raise ValueError(
            f"counts={counts!r} and speeds={speeds!r} must have the same length, "
            "with at least one GPU"
        )
    used = [s for c, s in zip(counts, speeds, strict=True) if c > 0]
    sync = sum(counts) * min(used)
    balanced = sum(c * s for c, s in zip(counts, speeds, strict=True))
    return {
        "synchronous": sync,
        "balanced": balanced,
        "lost_share": 1 - sync / balanced,
        "idle_share_fastest": 1 - min(used) / max(used),
    }


def contention_sweep(shares=(0.2, 0.4, 0.6, 0.8, 1.0), points: int = 91):
    """Throughput drop against the bandwidth other traffic takes, per share.

    Args:
        shares: fractions of the step that wait on the network, each in [0, 1].
        points: stolen-bandwidth values from 0 to 90%, >= 2.

    Returns:
        Columns ``stolen_pct, drop_pct, network_share`` (the share as a label).
    """
    points = check_int("points", points, 2)
    stolen = np.linspace(0.0, 0.9, points)
    return pd.concat(
        [
            pd.DataFrame(
                {
                    "stolen_pct": stolen * 100,
                    "drop_pct": contention_drop(f, stolen) * 100,
                    "network_share": f"{f:.0%}",
                }
            )
            for f in shares
        ],
        ignore_index=True,
    )


__all__ = [
    "contention_drop",
    "contention_sweep",
    "mixed_cluster_throughput",
    "network_share_for_drop",
]
