"""Published numbers for hardware the reader may not own, with their sources.

Each table is a CSV file in the repository's ``data/`` folder (its README gives
the provenance of each), shipped inside the package as ``clusterlab._published``
so that a lab finds it wherever the package is installed, Colab included::

    cl.published.names()                 # the tables there are
    df = cl.published.load("nvlink")     # one table as a DataFrame
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pandas as pd

__all__ = ["load", "names"]


def _folder():
    try:  # installed from a wheel (pip install git+..., as on Colab)
        return resources.files("clusterlab._published")
    except ModuleNotFoundError:  # an editable install reads the checkout's data/
        return Path(__file__).resolve().parents[2] / "data"


def names() -> list[str]:
    """The names of the published tables, sorted."""
    return sorted(
        p.name.removesuffix(".csv")
        for p in _folder().iterdir()
        if p.name.endswith(".csv")
    )


def load(name: str) -> pd.DataFrame:
    """One published table as a DataFrame.

    Args:
        name: the table's name, the CSV file's name without ``.csv``.

    Returns:
        The table; its columns carry their units in their names, and its
        ``source`` column says where each row comes from.
    """
    available = names()
    if name not in available:
        raise ValueError(
            f"name={name!r} is not a published table; choose one of {available}"
        )
    with (_folder() / f"{name}.csv").open("r", encoding="utf-8") as f:
        return pd.read_csv(f)
