"""The checks that decide the network labs' claims from a table of measured runs.

* ``link_fit``: alpha and beta fitted per link rate (``cl.core.alpha_beta``) on
  the fastest repetition of each size; beta must match the link's time per
  payload byte (``1 / rate``, scaled by the frame's header bytes) within the
  noise measured between repetitions, and the largest size's bus bandwidth must
  lie between 0.6 and 1.05 of the link rate.
* ``hierarchy_ratio``: the flat ring's time over the hierarchical all-reduce's,
  against the link-only model's ratio (1.5 at 2 nodes x 2 ranks).

Each raises ``AssertionError`` with the numbers when the claim fails.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from clusterlab.core.alpha_beta import fit_alpha_beta
from clusterlab.core.chart_checks import check_columns

#: TCP payload per Ethernet frame with timestamps: 1448 of 1514 bytes on the wire.
PAYLOAD_BYTES, FRAME_BYTES = 1448, 1514
MIN_TOLERANCE = 0.05


def link_bytes(size_bytes, nodes: int, ranks_per_node: int, algorithm: str):
    """Bytes one node's link carries each way in one all-reduce of ``size_bytes``."""
    p = nodes * ranks_per_node
    if algorithm == "ring":
        return np.asarray(size_bytes) * 2 * (p - 1) / p
    return np.asarray(size_bytes) * 2 * (nodes - 1) / nodes


def beta_model_s_per_B(rate_mbit: float) -> float:
    """Seconds per payload byte on a link of ``rate_mbit`` (headers included)."""
    return 8 / (rate_mbit * 1e6) * FRAME_BYTES / PAYLOAD_BYTES


def link_fit(df: pd.DataFrame) -> pd.DataFrame:
    """Fit alpha and beta per rate; return one row per rate with the verdict."""
    check_columns(df, ("nodes", "ranks_per_node", "rate_mbit", "size_mib", "algorithm",
                       "rep", "seconds", "busbw_GBps"), "df")  # fmt: skip
    rows = []
    for rate, g in df.groupby("rate_mbit"):
        nodes, per_node = int(g["nodes"].iloc[0]), int(g["ranks_per_node"].iloc[0])
        g = g.assign(link_B=link_bytes(g["size_mib"] * 2**20, nodes, per_node,
                                       g["algorithm"].iloc[0]))  # fmt: skip
        best = g.groupby("link_B")["seconds"].min()
        alpha, bw_Bps = fit_alpha_beta(best.index.to_numpy(), best.to_numpy())
        beta = 1.0 / bw_Bps  # seconds per byte (the book's fit returns B/s)
        # Noise: how far the slower repetitions of each size sit above the
        # fastest, at the sizes that decide beta (the larger half).
        big = g[g["link_B"] >= np.median(best.index)]
        spread = big.groupby("link_B")["seconds"].agg(lambda t: t.median() / t.min())
        noise = float(spread.max() - 1)
        model = beta_model_s_per_B(rate)
        top = g[g["size_mib"] == g["size_mib"].max()]
        frac = float(top["busbw_GBps"].max() / (rate * 1e6 / 8 / 1e9))
        tol = max(MIN_TOLERANCE, 3 * noise)
        ok = abs(beta / model - 1) <= tol and 0.6 <= frac <= 1.05
        rows.append(
            {
                "rate_mbit": rate,
                "alpha_s": alpha,
                "beta_s_per_B": beta,
                "beta_model_s_per_B": model,
                "beta_over_model": beta / model,
                "noise": noise,
                "tolerance": tol,
                "busbw_over_link": frac,
                "ok": ok,
            }
        )
    return pd.DataFrame(rows)


def check_link_fit(df: pd.DataFrame) -> pd.DataFrame:
    """``link_fit``, raising AssertionError with the numbers if a rate fails."""
    fit = link_fit(df)
    bad = fit[~fit["ok"]]
    if len(bad):
        raise AssertionError(
            "beta does not match 1/rate within the measured noise, or the bus "
            "bandwidth is not 0.6-1.05 of the link:\n" + bad.to_string(index=False)
        )
    return fit


def hierarchy_model_ratio(nodes: int, ranks_per_node: int) -> float:
    """The link-only model: ring's bytes per link over the hierarchical one's."""
    ring = link_bytes(1.0, nodes, ranks_per_node, "ring")
    return float(ring / link_bytes(1.0, nodes, ranks_per_node, "hierarchical"))


def hierarchy_ratio(df: pd.DataFrame, model: float, low: float = 1.2) -> dict:
    """Measured ring/hierarchical time ratio (fastest of each) against ``model``.

    The claim holds when the ratio is at least ``low`` and at most the model's
    (which counts the links only; the work inside a node only lowers it) plus
    ten per cent; a wrong model, or no advantage at all, fails.
    """
    check_columns(df, ("algorithm", "seconds"), "df")
    best = df.groupby("algorithm")["seconds"].min()
    if not {"ring", "hierarchical"} <= set(best.index):
        raise ValueError("df must hold runs of both 'ring' and 'hierarchical'")
    ratio = float(best["ring"] / best["hierarchical"])
    ok = low <= ratio <= model * 1.10
    return {
        "ring_s": float(best["ring"]),
        "hierarchical_s": float(best["hierarchical"]),
        "ratio": ratio,
        "model": model,
        "ok": ok,
    }


def check_hierarchy(df: pd.DataFrame, model: float) -> dict:
    """``hierarchy_ratio``, raising AssertionError with the numbers on a miss."""
    out = hierarchy_ratio(df, model)
    if not out["ok"]:
        raise AssertionError(
            f"ring/hierarchical = {out['ratio']:.2f}, outside [1.2, "
            f"{model * 1.1:.2f}] (model {model:.2f}): {out}"
        )
    return out
