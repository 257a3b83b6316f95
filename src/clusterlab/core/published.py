"""Published numbers for hardware the reader may not own, with their sources.

Each table is a CSV file in the repository's ``data/`` folder (its README gives
the provenance of each; ``data/`` is ``src/clusterlab/core/data``, package data
of this package), so that a lab finds it wherever the package is installed,
Colab included::

    cl.published.names()                 # the tables there are
    df = cl.published.load("gpu_specs")  # one table as a DataFrame
    row = cl.published.row("gpu_specs", part="H100 SXM5")   # one row
    peak = cl.published.value("gpu_specs", "bf16_dense_flops", part="H100 SXM5")
    cl.published.collective_systems()   # named all-reduce sweeps, one row each

Models read their hardware, network, price and power figures through ``value``
and ``row`` rather than typing them, so that each figure lives once, in a row
that says where it comes from.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import pandas as pd


def _folder():
    return resources.files("clusterlab.core") / "data"


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
    return _load(name).copy()


@cache
def _load(name: str) -> pd.DataFrame:
    available = names()
    if name not in available:
        raise ValueError(
            f"name={name!r} is not a published table; choose one of {available}"
        )
    with (_folder() / f"{name}.csv").open("r", encoding="utf-8") as f:
        return pd.read_csv(f)


def row(name: str, **match) -> pd.Series:
    """The one row of a published table whose columns equal ``match``.

    Args:
        name: the table's name (see :func:`names`).
        **match: column=value pairs that pick exactly one row, e.g.
            ``part="H100 SXM5"``.

    Returns:
        The row as a Series (its ``source`` says where it comes from).
    """
    df = _load(name)
    if not match:
        raise ValueError(f"row({name!r}) needs column=value pairs that pick one row")
    unknown = sorted(set(match) - set(df.columns))
    if unknown:
        raise ValueError(
            f"{unknown} are not columns of {name!r}; its columns are {list(df.columns)}"
        )
    hit = df
    for col, want in match.items():
        hit = hit[hit[col] == want]
    if len(hit) != 1:
        choices = df[list(match)].drop_duplicates().to_dict("records")
        raise ValueError(
            f"{match} picks {len(hit)} rows of {name!r}, not one; rows are {choices}"
        )
    return hit.iloc[0].copy()


def value(name: str, column: str, **match):
    """One figure of a published table: ``row(name, **match)[column]``.

    Args:
        name: the table's name.
        column: the column that holds the figure (its unit is in its name).
        **match: column=value pairs that pick exactly one row.

    Returns:
        The figure (a float for numeric columns).
    """
    r = row(name, **match)
    if column not in r.index:
        raise ValueError(
            f"column={column!r} is not a column of {name!r}; choose one of "
            f"{list(r.index)}"
        )
    v = r[column]
    return float(v) if isinstance(v, int | float) or hasattr(v, "dtype") else v


def collective_systems(op: str = "all_reduce") -> pd.DataFrame:
    """The named systems of ``collective_busbw_published`` with a sized figure.

    Each name is what ``cl.models.collectives.bus_bandwidth(nbytes, system)``
    takes; a system is one GPU, GPU count, fabric, NCCL version and tool.

    Args:
        op: the collective (``"all_reduce"``; ``"peer_copy"`` has no sizes).

    Returns:
        One row per system: ``system, gpu, n_gpus, n_nodes, gpus_per_node,
        fabric, algorithm`` (the algorithms NCCL used, from the smallest size
        up, e.g. ``"ring, NVLS"``), ``nccl_version, tool, points``,
        ``min_size_bytes, max_size_bytes, max_busbw_Bps, source_key``.
    """
    df = _load("collective_busbw_published")
    df = df[(df["op"] == op) & df["size_bytes"].notna()].sort_values(
        ["system", "size_bytes"]
    )
    if df.empty:
        raise ValueError(f"op={op!r} has no sized figure; try op='all_reduce'")
    fixed = ["gpu", "n_gpus", "n_nodes", "gpus_per_node", "fabric", "nccl_version"]
    out = df.groupby("system", sort=False).agg(
        **{c: (c, "first") for c in fixed},
        algorithm=("algorithm", lambda a: ", ".join(dict.fromkeys(a))),
        tool=("tool", "first"),
        points=("size_bytes", "size"),
        min_size_bytes=("size_bytes", "min"),
        max_size_bytes=("size_bytes", "max"),
        max_busbw_Bps=("busbw_Bps", "max"),
        source_key=("source_key", "first"),
    )
    return out.reset_index()


__all__ = ["collective_systems", "load", "names", "row", "value"]
