"""The input check every chart builder makes: a DataFrame with the columns it draws.

Every chart module imports it, so importing it also applies the book's one look
(``theme``) to every chart, wherever the chart is drawn.
"""

from __future__ import annotations

import pandas as pd

from clusterlab.core import theme as _theme  # noqa: F401  (registers the look)


def check_columns(df, needed, name: str = "df") -> None:
    """Raise ``ValueError`` unless ``df`` is a DataFrame with all of ``needed``."""
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{name} must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise ValueError(
            f"{name} lacks the column(s) {missing}; it has {list(df.columns)}"
        )
