"""One monthly budget spent on GPU servers or on CPU nodes, for an I/O-bound job.

When a pipeline's speed is set by reading its data, its time is
``data / (nodes x disk bandwidth per node)`` whatever the processors, so what a
budget buys is aggregate disk bandwidth. A CPU fleet beats a GPU fleet bought
with the same money by the ratio of their disk bandwidth per dollar::

    speedup = (B_cpu / price_cpu) / (B_gpu / price_gpu)

(before rounding to whole nodes). The node prices are rows of
``data/prices.csv``; the disk bandwidths and the data volume are assumptions
(``data/economics_assumptions.csv``), so results that rest on them are
illustrations.
"""

from __future__ import annotations

import pandas as pd

from clusterlab.core import published
from clusterlab.core.units import HOUR_S
from clusterlab.core.validate import check_float
from clusterlab.models.economics import GPUS_PER_NODE, REFERENCE_ON_DEMAND

HOURS_PER_MONTH = 730.0  # 8760 h / 12


_MAX_NODE_HOURLY = 1e4  # sanity bound of the argument check


def _assumed(item: str) -> float:
    return published.value("economics_assumptions", "value", item=item)


def same_budget_fleets(
    budget_per_month: float,
    *,
    data_bytes: float | None = None,
    gpu_node_price_per_hour: float | None = None,
    cpu_node_price_per_hour: float | None = None,
    gpu_node_io_Bps: float | None = None,
    cpu_node_io_Bps: float | None = None,
) -> pd.DataFrame:
    """GPU servers or CPU nodes for one monthly budget, reading the same data.

    Args:
        budget_per_month: dollars a month, in (0, 1e12].
        data_bytes: bytes the job reads; default: the row
            ``w5_data_bytes_per_month``.
        gpu_node_price_per_hour: dollars per 8-GPU server-hour; default: 8 x
            the reference on-demand GPU-hour.
        cpu_node_price_per_hour: dollars per CPU node-hour; default: the row
            ``cpu_node_32core_hyperstack``.
        gpu_node_io_Bps, cpu_node_io_Bps: sustained disk read per node, bytes/s;
            defaults: the assumption rows ``gpu_node_disk_Bps`` and
            ``cpu_node_disk_Bps``.

    Returns:
        One row per fleet (``GPU``, ``CPU``) with ``nodes``, ``node_price``,
        ``node_io_Bps``, ``fleet_io_Bps``, ``hours`` and ``dollars`` for the
        job; ``attrs["cpu_speedup"]`` is the GPU fleet's hours / the CPU's.
    """
    budget = check_float(
        "budget_per_month", budget_per_month, 0.0, 1e12, low_inclusive=False
    )
    prices = published.load("prices").set_index("item")["usd"]
    fleets = {
        "GPU": (
            gpu_node_price_per_hour
            if gpu_node_price_per_hour is not None
            else GPUS_PER_NODE * prices[REFERENCE_ON_DEMAND],
            gpu_node_io_Bps
            if gpu_node_io_Bps is not None
            else _assumed("gpu_node_disk_Bps"),
        ),
        "CPU": (
            cpu_node_price_per_hour
            if cpu_node_price_per_hour is not None
            else prices["cpu_node_32core_hyperstack"],
            cpu_node_io_Bps
            if cpu_node_io_Bps is not None
            else _assumed("cpu_node_disk_Bps"),
        ),
    }
    data = _assumed("w5_data_bytes_per_month") if data_bytes is None else data_bytes
    rows = []
    for name, (price, io) in fleets.items():
        price = check_float(
            f"{name.lower()}_node_price_per_hour",
            price,
            0.0,
            _MAX_NODE_HOURLY,
            low_inclusive=False,
        )
        nodes = int(budget // (price * HOURS_PER_MONTH))
        if nodes < 1:
            raise ValueError(
                f"budget_per_month={budget_per_month!r} buys no {name} node at "
                f"${price:.2f} per hour; allowed: at least "
                f"{price * HOURS_PER_MONTH:.0f}"
            )
        job = io_bound_cost(data, nodes, io, price)
        rows.append(
            {
                "fleet": name,
                "nodes": nodes,
                "node_price": price,
                "node_io_Bps": io,
                "fleet_io_Bps": nodes * io,
                "hours": job["seconds"] / 3600.0,
                "dollars": job["dollars"],
            }
        )
    df = pd.DataFrame(rows)
    df.attrs["cpu_speedup"] = float(df["hours"].iloc[0] / df["hours"].iloc[1])
    return df


def io_bound_cost(
    data_bytes: float, n_nodes: int, node_io_Bps: float, node_price_per_hour: float
) -> dict:
    """Time and cost of a job whose speed is set by reading its data from disk.

    When disk I/O is the bottleneck, faster arithmetic does not help: the job
    takes ``data / (nodes x disk bandwidth per node)`` whatever the processors.

    Args:
        data_bytes: bytes to read, in (0, 1e21].
        n_nodes: nodes reading in parallel, in [1, 1e6].
        node_io_Bps: sustained read bandwidth of one node, bytes/s, in (0, 1e12].
        node_price_per_hour: what one node costs per hour, dollars, in [0, 1e4].

    Returns:
        ``{"seconds", "dollars"}`` for the job.
    """
    data = check_float("data_bytes", data_bytes, 0.0, 1e21, low_inclusive=False)
    nodes = check_float("n_nodes", n_nodes, 1.0, 1e6)
    io = check_float("node_io_Bps", node_io_Bps, 0.0, 1e12, low_inclusive=False)
    price = check_float(
        "node_price_per_hour", node_price_per_hour, 0.0, _MAX_NODE_HOURLY
    )
    seconds = data / (nodes * io)
    return {"seconds": seconds, "dollars": seconds / HOUR_S * nodes * price}


__all__ = ["HOURS_PER_MONTH", "io_bound_cost", "same_budget_fleets"]
