"""What a GPU cluster costs up front: servers, network fabric, storage, facility.

A cluster's purchase is more than its GPU servers. Every GPU has a 400 Gb/s
port on the fabric, and the fabric's switches grow with the cluster: a
rail-optimised fabric of 64-port switches needs one layer up to 64 nodes
(8 rails of one switch each), two up to 2,048 nodes and three up to 65,536, and
with ``L`` layers about ``(2L - 1)`` switch ports per GPU port. Cables and
transceivers grow with the layers too; their cost per GPU is read from the
published cost model's totals (``data/cluster_capex_published.csv``). Shared
storage holds datasets and checkpoints, and the facility (power distribution,
cooling, space) is sized by the servers' maximum draw.

Every default is a row of ``data/prices.csv``, ``data/power.csv`` or
``data/economics_assumptions.csv``; the fabric counts follow the cost model
those rows come from.
"""

from __future__ import annotations

import math

import pandas as pd

from clusterlab.core import published
from clusterlab.core.validate import check_int

GPUS_PER_NODE = 8


RADIX = 64  # ports of the priced 400 Gb/s InfiniBand switch


#: Rows of ``data/prices.csv`` that price one 8-GPU H100 server.
NODE_PRICE_ITEMS = (
    "dgx_h100_low",
    "dgx_h100_high",
    "hgx_h100_node",
    "hgx_h100_node_thinkmate",
)


def _price(item: str) -> float:
    return published.value("prices", "usd", item=item)


def cables_per_gpu(layers: int) -> float:
    """Connectors and cables per GPU port of a fabric of ``layers`` switch layers.

    Read from the smallest cluster with that many layers in
    ``data/cluster_capex_published.csv`` (its cables over its GPUs).

    Args:
        layers: 1, 2 or 3.

    Returns:
        Dollars per GPU.
    """
    n = check_int("layers", layers, 1, 3)
    df = published.load("cluster_capex_published")
    row = df[df["switch_layers"] == n].sort_values("n_gpus").iloc[0]
    return float(row["cables_usd"] / row["n_gpus"])


def fabric_layers(n_nodes: int, radix: int = RADIX) -> int:
    """Switch layers of a rail-optimised fat tree of ``radix``-port switches.

    Args:
        n_nodes: servers of 8 GPUs, in [1, radix**3 / 4].
        radix: ports per switch, in [4, 1024].

    Returns:
        1 up to ``radix`` nodes, 2 up to ``radix**2 / 2``, 3 up to ``radix**3 / 4``.
    """
    r = check_int("radix", radix, 4, 1024)
    n = check_int("n_nodes", n_nodes, 1, r**3 // 4)
    return 1 if n <= r else 2 if n <= r**2 // 2 else 3


def fabric_capex(
    n_gpus: int,
    *,
    switch_usd: float | None = None,
    radix: int = RADIX,
    gpus_per_node: int = GPUS_PER_NODE,
) -> dict:
    """Switches and cables of one 400 Gb/s port per GPU.

    Args:
        n_gpus: GPUs, one fabric port each, in [1, 2**20], a multiple of
            ``gpus_per_node``.
        switch_usd: price of one switch, dollars; default: the row
            ``ib_switch_64x400g``.
        radix: ports per switch, in [4, 1024].
        gpus_per_node: GPUs per server, in [1, 64].

    Returns:
        ``{"layers", "switches", "switches_usd", "cables_usd", "total_usd"}``.
    """
    n = check_int("n_gpus", n_gpus, 1, 2**20)
    per_node = check_int("gpus_per_node", gpus_per_node, 1, 64)
    if n % per_node:
        raise ValueError(f"n_gpus={n} must be a multiple of gpus_per_node={per_node}")
    layers = fabric_layers(n // per_node, radix)
    switches = math.ceil(n * (2 * layers - 1) / radix)
    price = _price("ib_switch_64x400g") if switch_usd is None else switch_usd
    if not (isinstance(price, int | float) and price >= 0):
        raise ValueError(f"switch_usd={switch_usd!r} must be a number >= 0")
    cables = n * cables_per_gpu(layers)
    return {
        "layers": layers,
        "switches": switches,
        "switches_usd": switches * float(price),
        "cables_usd": cables,
        "total_usd": switches * float(price) + cables,
    }


def cluster_capex(
    n_gpus: int,
    *,
    node_usd: float | None = None,
    switch_usd: float | None = None,
    include_facility: bool = True,
) -> dict:
    """The up-front cost of a cluster of 8-GPU H100 servers, term by term.

    Args:
        n_gpus: GPUs, a multiple of 8, in [8, 2**20].
        node_usd: price of one 8-GPU server with its network cards, dollars;
            default: the row ``hgx_h100_node``.
        switch_usd: price of one 64-port switch; default: its row.
        include_facility: add the facility fit-out for the servers' maximum
            draw (False when the cluster goes into rented colocation space).

    Returns:
        Dollars: ``servers``, ``fabric``, ``storage``, ``facility`` and
        ``total``, and ``per_gpu`` (total / n_gpus).
    """
    fabric = fabric_capex(n_gpus, switch_usd=switch_usd)
    nodes = n_gpus // GPUS_PER_NODE
    node = _price("hgx_h100_node") if node_usd is None else node_usd
    if not (isinstance(node, int | float) and node > 0):
        raise ValueError(f"node_usd={node_usd!r} must be a number > 0")
    storage_tb = published.value(
        "economics_assumptions", "value", item="storage_TB_per_gpu"
    )
    storage = n_gpus * storage_tb * _price("storage_flash_per_TB")
    node_kw = published.value("power", "W", item="dgx_h100_max") / 1000.0
    facility = (
        nodes * node_kw * _price("facility_fitout_per_kW") if include_facility else 0.0
    )
    terms = {
        "servers": nodes * float(node),
        "fabric": fabric["total_usd"],
        "storage": storage,
        "facility": facility,
    }
    total = sum(terms.values())
    return {**terms, "total": total, "per_gpu": total / n_gpus}


def e1_capex_table(n_gpus: int = 512) -> pd.DataFrame:
    """The up-front cost of ``n_gpus`` H100 at each published server price.

    Args:
        n_gpus: GPUs, a multiple of 8.

    Returns:
        One row per (server price row, facility or colocation), with columns
        ``node_item``, ``node_usd``, ``facility``, the terms of
        ``cluster_capex`` and ``total``.
    """
    rows = []
    for item in NODE_PRICE_ITEMS:
        for with_facility in (False, True):
            c = cluster_capex(
                n_gpus, node_usd=_price(item), include_facility=with_facility
            )
            rows.append(
                {
                    "node_item": item,
                    "node_usd": _price(item),
                    "with_facility": with_facility,
                    **c,
                }
            )
    return pd.DataFrame(rows)


__all__ = [
    "NODE_PRICE_ITEMS",
    "cables_per_gpu",
    "cluster_capex",
    "e1_capex_table",
    "fabric_capex",
    "fabric_layers",
]
