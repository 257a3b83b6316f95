"""Fitting the alpha–beta model to measured message times.

Times span several orders of magnitude (microseconds for small messages,
hundreds of milliseconds for large ones), so the fit minimises *relative*
error: an ordinary least-squares fit would let the largest message decide
everything and leave alpha, the small-message latency, meaningless.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def _as_positive_array(name: str, values) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={values!r} must be a sequence of numbers") from None
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    bad = ~np.isfinite(arr) | (arr <= 0)
    if bad.any():
        raise ValueError(
            f"{name} must hold finite values > 0; got {arr[bad][0]!r} at index "
            f"{int(np.flatnonzero(bad)[0])}"
        )
    return arr


def fit_alpha_beta(sizes, times) -> tuple[float, float]:
    """Fit ``time = alpha + size / beta`` to measurements, minimising relative error.

    Args:
        sizes: message sizes in bytes, each > 0; at least two distinct sizes.
        times: measured seconds for each size, each > 0, same length as ``sizes``.

    Returns:
        ``(alpha_s, beta_Bps)``: latency in seconds (>= 0) and bandwidth in bytes/s
        (> 0; ``inf`` if the times do not grow with size).
    """
    s = _as_positive_array("sizes", sizes)
    t = _as_positive_array("times", times)
    if len(s) != len(t):
        raise ValueError(
            f"sizes and times must have the same length: got {len(s)} and {len(t)}"
        )
    if len(np.unique(s)) < 2:
        raise ValueError(
            f"sizes must hold at least 2 distinct values to fit two parameters; "
            f"got {len(np.unique(s))} distinct in {len(s)} points"
        )
    # Divide each equation alpha + s*b = t by t: every point then weighs by its
    # relative error.
    design = np.column_stack([1.0 / t, s / t])
    (alpha, inv_beta), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if alpha < 0:  # latency cannot be negative: refit through the origin
        alpha = 0.0
        inv_beta = float(np.sum(s / t) / np.sum((s / t) ** 2))
    if inv_beta <= 0:  # times do not grow with size: no bandwidth term
        inv_beta = 0.0
        alpha = float(np.sum(1.0 / t) / np.sum(1.0 / t**2))
    beta = math.inf if inv_beta == 0 else 1.0 / inv_beta
    return float(alpha), float(beta)


def alpha_beta_holdout(df: pd.DataFrame, fit=None) -> pd.DataFrame:
    """Fit alpha–beta on every other size of a sweep and predict the sizes left out.

    Args:
        df: one row per size with ``size_bytes`` and ``time_s`` (at least 4 rows),
            such as ``bench_collective`` returns.
        fit: ``fit(sizes, times) -> (alpha_s, beta_Bps)``; ``fit_alpha_beta`` by
            default (a test passes a wrong one to see the check fail).

    Returns:
        The held-out rows with ``predicted_s`` and ``rel_error`` (|measured −
        predicted| / predicted) added; the fit's ``alpha_s`` and ``beta_Bps``
        are in ``.attrs``.
    """
    if not isinstance(df, pd.DataFrame) or not {"size_bytes", "time_s"} <= set(
        df.columns
    ):
        raise ValueError("df must be a DataFrame with size_bytes and time_s columns")
    if len(df) < 4:
        raise ValueError(f"df has {len(df)} rows; at least 4 sizes are needed")
    ordered = df.sort_values("size_bytes").reset_index(drop=True)
    part, held = ordered.iloc[::2], ordered.iloc[1::2].copy()
    alpha_s, beta_Bps = (fit or fit_alpha_beta)(part["size_bytes"], part["time_s"])
    held["predicted_s"] = alpha_s + held["size_bytes"] / beta_Bps
    held["rel_error"] = (
        np.abs(held["time_s"] - held["predicted_s"]) / held["predicted_s"]
    )
    held.attrs.update(alpha_s=alpha_s, beta_Bps=beta_Bps)
    return held
