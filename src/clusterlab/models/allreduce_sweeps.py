"""Precomputed all-reduce sweeps for the networks charts: model grids and busbw.

The book's pages draw these tables with Vega-Lite controls, so every case a
reader can pick is computed here, by the models, before the page is built:

* :func:`allreduce_model_sweep`: ring, tree (Rabenseifner) and hierarchical
  all-reduce times under the alpha–beta model, over latencies, bandwidths,
  sizes and GPU counts;
* :func:`busbw_size_sweep`: published bus bandwidth against message size for
  named systems, the published points and the interpolation between them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from clusterlab.core import published
from clusterlab.models.collectives import (
    ALGORITHMS,
    TABLE,
    allreduce_time,
    bus_bandwidth,
)
from clusterlab.models.links import LINKS


def network_bandwidths_Bps() -> tuple[float, float, float]:
    """Per-GPU network bandwidths the model chart offers, from the link rows.

    Returns:
        bytes/s per direction: one 100 GbE port shared by 8 GPUs, one 100 GbE
        port per GPU, one NDR400 port per GPU.
    """
    eth = LINKS["100GbE TCP"].per_direction_Bps
    return (eth / 8, eth, LINKS["NDR400 InfiniBand"].per_direction_Bps)


def allreduce_model_sweep(
    alphas_s=None,
    bandwidths_Bps=None,
    log2_sizes=(12, 20, 28, 34),
    gpus=tuple(2**k for k in range(1, 13)),
    gpus_per_node: int = 8,
    intra: str = "NVLink 4",
) -> pd.DataFrame:
    """Model times of ring, tree and hierarchical all-reduce over a grid.

    The hierarchical rows use ``gpus_per_node`` GPUs per node joined by the
    link ``intra`` of ``LINKS`` (fewer GPUs if there are fewer in all), and the
    row's bandwidth as each GPU's share of the network.

    Args:
        alphas_s: latencies per step, seconds (None: those of ``LINKS``).
        bandwidths_Bps: network bytes/s per GPU (None: ``network_bandwidths_Bps``).
        log2_sizes: message sizes as powers of two (bytes).
        gpus: GPU counts.
        gpus_per_node: GPUs per node for the hierarchical rows.
        intra: the link inside a node (a name in ``LINKS``).

    Returns:
        Columns ``algorithm, gpus, alpha_us, bandwidth_GBps, log2_bytes, time_s``
        (to 4 significant digits).
    """
    if alphas_s is None:
        alphas_s = sorted({lk.alpha_s for lk in LINKS.values()})
    if bandwidths_Bps is None:
        bandwidths_Bps = network_bandwidths_Bps()
    fast = LINKS[intra]
    rows = []
    for alpha in alphas_s:
        for bw in bandwidths_Bps:
            for k in log2_sizes:
                for n in gpus:
                    g = min(n, gpus_per_node)
                    for algorithm in ALGORITHMS:
                        topo = {}
                        if algorithm == "hierarchical":
                            topo = dict(
                                gpus_per_node=g,
                                intra_alpha_s=fast.alpha_s,
                                intra_bandwidth_Bps=fast.effective_Bps,
                            )
                        t = allreduce_time(2.0**k, n, alpha, bw, algorithm, **topo)
                        t = float(f"{t:.4g}")  # 4 digits: a smaller chart
                        rows.append((algorithm, n, alpha * 1e6, bw / 1e9, k, t))
    cols = ["algorithm", "gpus", "alpha_us", "bandwidth_GBps", "log2_bytes", "time_s"]
    return pd.DataFrame(rows, columns=cols)


def busbw_size_sweep(systems, points_per_octave: int = 4) -> pd.DataFrame:
    """Published busbw of each system against size: the points and the curve.

    The curve spans each system's published sizes (one octave further on each
    side, to show the plateau and the fall below the smallest point).

    Args:
        systems: names from ``cl.published.collective_systems()`` with at least
            two published sizes.
        points_per_octave: curve points per doubling of size, >= 1.

    Returns:
        Columns ``system, label, kind`` ("published" or "interpolated"),
        ``size_bytes, busbw_Bps, busbw_GBps, algorithm, link_per_direction_Bps``.
    """
    pub = published.load(TABLE)
    pub = pub[(pub["op"] == "all_reduce") & pub["size_bytes"].notna()]
    listing = published.collective_systems().set_index("system")
    frames = []
    for system in systems:
        pts = pub[pub["system"] == system].sort_values("size_bytes")
        if len(pts) < 2:
            raise ValueError(
                f"systems: {system!r} has {len(pts)} published size(s); a curve "
                "needs two or more"
            )
        info = listing.loc[system]
        label = f"{system} ({info['gpu']}, {info['algorithm']})"
        lo, hi = np.log2(pts["size_bytes"].iloc[[0, -1]].to_numpy()) + [-1, 1]
        grid = 2 ** np.linspace(lo, hi, int((hi - lo) * points_per_octave) + 1)
        frames.append(
            pd.DataFrame(
                {
                    "system": system,
                    "label": label,
                    "kind": "interpolated",
                    "size_bytes": grid,
                    "busbw_Bps": bus_bandwidth(grid, system),
                    "algorithm": info["algorithm"],
                    "link_per_direction_Bps": pts["link_per_direction_Bps"].iloc[0],
                }
            )
        )
        frames.append(
            pts[["system", "size_bytes", "busbw_Bps", "algorithm"]].assign(
                label=label,
                kind="published",
                link_per_direction_Bps=pts["link_per_direction_Bps"],
            )
        )
    df = pd.concat(frames, ignore_index=True)
    return df.assign(busbw_GBps=df["busbw_Bps"] / 1e9)


def largest_size_points(op: str = "all_reduce", keep_unsized: bool = True):
    """Each published system's figure at its largest size (its plateau).

    Args:
        op: the collective, or None for every op.
        keep_unsized: also keep rows that state no size (the peer copy).

    Returns:
        Rows of ``collective_busbw_published`` with a ``label`` column
        (system, and the size in GiB where one is stated).
    """
    pub = published.load(TABLE)
    if op is not None:
        pub = pub[(pub["op"] == op) | (keep_unsized & pub["size_bytes"].isna())]
    sized = pub.dropna(subset=["size_bytes"]).sort_values("size_bytes")
    top = sized.groupby("system", sort=False).tail(1)
    rows = pd.concat([top, pub[pub["size_bytes"].isna()]] if keep_unsized else [top])
    size = rows["size_bytes"].map(
        lambda s: "" if pd.isna(s) else f" · {s / 2**30:,.3g} GiB"
    )
    return rows.assign(label=rows["system"] + size).reset_index(drop=True)


__all__ = [
    "allreduce_model_sweep",
    "busbw_size_sweep",
    "largest_size_points",
    "network_bandwidths_Bps",
]
