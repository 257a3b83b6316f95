"""What GPU-hours cost: owning a cluster against renting one, and a run's bill.

An owned GPU costs money every hour of its life whether it works or not: its
purchase (its share of the server, the network fabric and the storage) spread
over its lifetime, the facility it sits in, operations, and the power an idle
server still draws, times the machine room's PUE. Working costs only the extra
power a busy server draws above idle. So with ``fixed`` the hourly cost of an
idle GPU and ``power`` the extra of a busy one, the owned GPU's cost per
*useful* hour falls as its utilisation ``u`` rises, and crosses the cloud price
at the break-even utilisation::

    fixed / u + power = cloud price   =>   u* = fixed / (cloud price - power)

Every default is read from a row of ``data/prices.csv``, ``data/power.csv`` or
``data/economics_assumptions.csv`` that says what it is, where and when it was
priced, and where it comes from (``DEFAULT_ROWS`` names them); rows whose
source starts with "assumption" make the results that rest on them
illustrations. Units: dollars, hours, watts; utilisation is a fraction in (0, 1].
"""

from __future__ import annotations

import math

import pandas as pd

from clusterlab.core import published
from clusterlab.core.validate import check_float

HOURS_PER_YEAR = 8760.0


GPUS_PER_NODE = 8  # an HGX or DGX H100 server holds 8 GPUs


#: Upper bounds of the argument checks (sanity ranges, not published figures).
_MAX_CAPEX = 1e7


_MAX_HOURLY = 1e3


def check_cloud_price(cloud_price_per_gpu_hour) -> float:
    """The cloud price per GPU-hour, in dollars, checked to be in (0, 1000]."""
    return check_float(
        "cloud_price_per_gpu_hour",
        cloud_price_per_gpu_hour,
        0.0,
        _MAX_HOURLY,
        low_inclusive=False,
    )


_MAX_POWER = 1e5


_MAX_KWH = 10.0


def _price(item: str) -> float:
    return published.value("prices", "usd", item=item)


def _power(item: str, column: str = "W") -> float:
    return published.value("power", column, item=item)


def _assumed(item: str) -> float:
    return published.value("economics_assumptions", "value", item=item)


#: The data rows behind each default: ``(table, column=value match)`` pairs.
DEFAULT_ROWS = {
    "capex_per_gpu": [("prices", {"item": "hgx_h100_node"})],
    "fabric_per_gpu": [
        ("prices", {"item": "ib_switch_64x400g"}),
        ("cluster_capex_published", {"n_gpus": 512}),
    ],
    "storage_per_gpu": [
        ("prices", {"item": "storage_flash_per_TB"}),
        ("economics_assumptions", {"item": "storage_TB_per_gpu"}),
    ],
    "facility_per_kw": [("prices", {"item": "facility_fitout_per_kW"})],
    "facility_lifetime_years": [
        ("economics_assumptions", {"item": "facility_lifetime_years"})
    ],
    "lifetime_years": [("economics_assumptions", {"item": "lifetime_years"})],
    "watts_per_gpu": [("power", {"item": "dgx_h100_max"})],
    "idle_watts_per_gpu": [("power", {"item": "dgx_h100_idle"})],
    "pue": [("power", {"item": "pue_new_build"})],
    "price_per_kwh": [("prices", {"item": "electricity_industrial_mid_atlantic"})],
    "ops_fraction_per_year": [
        ("economics_assumptions", {"item": "ops_fraction_per_year"})
    ],
}


def default_sources() -> pd.DataFrame:
    """Each default with the rows it is read from and their sources.

    Returns:
        A DataFrame with columns ``input``, ``table``, ``row``, ``source`` and
        ``source_date``.
    """
    rows = []
    for name, pairs in DEFAULT_ROWS.items():
        for table, match in pairs:
            r = published.row(table, **match)
            rows.append((name, table, match, r["source"], r["source_date"]))
    return pd.DataFrame(
        rows, columns=["input", "table", "row", "source", "source_date"]
    )


def default_inputs() -> dict:
    """The owned H100's inputs, each read from its data row (see ``DEFAULT_ROWS``).

    The fabric share is that of a one-layer InfiniBand fabric (up to 64 nodes,
    as for 512 GPUs): one 64-port switch per 64 GPU ports, and the cables.

    Returns:
        A dict of keyword arguments for ``onprem_hourly``.
    """
    from clusterlab.models.cluster_capex import RADIX, cables_per_gpu

    return {
        "capex_per_gpu": _price("hgx_h100_node") / GPUS_PER_NODE,
        "fabric_per_gpu": _price("ib_switch_64x400g") / RADIX + cables_per_gpu(1),
        "storage_per_gpu": _price("storage_flash_per_TB")
        * _assumed("storage_TB_per_gpu"),
        "facility_per_kw": _price("facility_fitout_per_kW"),
        "facility_lifetime_years": _assumed("facility_lifetime_years"),
        "lifetime_years": _assumed("lifetime_years"),
        "watts_per_gpu": _power("dgx_h100_max") / GPUS_PER_NODE,
        "idle_watts_per_gpu": _power("dgx_h100_idle") / GPUS_PER_NODE,
        "pue": _power("pue_new_build", "pue"),
        "price_per_kwh": _price("electricity_industrial_mid_atlantic"),
        "ops_fraction_per_year": _assumed("ops_fraction_per_year"),
    }


#: The on-demand and reserved cloud rows the book compares with by default: an
#: 8-GPU instance (like for like with an 8-GPU server) and a reserved rate.
REFERENCE_ON_DEMAND = "h100_sxm_lambda_8x"


REFERENCE_RESERVED = "h100_sxm_hyperstack_reserved"


def cloud_prices() -> pd.DataFrame:
    """The cloud H100 rows of ``data/prices.csv``, cheapest first.

    Returns:
        Columns ``item``, ``what``, ``where``, ``usd`` (per GPU-hour),
        ``conditions``, ``source_date``.
    """
    df = published.load("prices")
    df = df[df["per"] == "GPU-hour"]
    cols = ["item", "what", "where", "usd", "conditions", "source_date"]
    return df[cols].sort_values("usd").reset_index(drop=True)


def cloud_price(item: str = REFERENCE_ON_DEMAND) -> float:
    """Dollars per GPU-hour of one cloud row (default: the reference on-demand).

    Args:
        item: an ``item`` of ``cloud_prices()``.
    """
    names = list(cloud_prices()["item"])
    if item not in names:
        raise ValueError(
            f"item={item!r} is not a cloud price row; choose one of {names}"
        )
    return _price(item)


#: Defaults for one H100 GPU in an owned cluster, read from ``data/``.
DEFAULTS = default_inputs()


def onprem_hourly(
    *,
    capex_per_gpu: float = DEFAULTS["capex_per_gpu"],
    fabric_per_gpu: float = DEFAULTS["fabric_per_gpu"],
    storage_per_gpu: float = DEFAULTS["storage_per_gpu"],
    facility_per_kw: float = DEFAULTS["facility_per_kw"],
    facility_lifetime_years: float = DEFAULTS["facility_lifetime_years"],
    lifetime_years: float = DEFAULTS["lifetime_years"],
    watts_per_gpu: float = DEFAULTS["watts_per_gpu"],
    idle_watts_per_gpu: float = DEFAULTS["idle_watts_per_gpu"],
    pue: float = DEFAULTS["pue"],
    price_per_kwh: float = DEFAULTS["price_per_kwh"],
    ops_fraction_per_year: float = DEFAULTS["ops_fraction_per_year"],
) -> dict:
    """An owned GPU's cost per hour: what every hour costs, and the extra of work.

    Args:
        capex_per_gpu: the GPU's share of its server's price, dollars, in (0, 1e7].
        fabric_per_gpu: its share of the network fabric (switches, cables),
            dollars, in [0, 1e7].
        storage_per_gpu: its share of the shared storage, dollars, in [0, 1e7].
        facility_per_kw: facility capex per kW of IT load (power, cooling,
            space), dollars, in [0, 1e7]; the GPU needs ``watts_per_gpu`` of it.
        facility_lifetime_years: years the facility is written off over, (0, 50].
        lifetime_years: years the IT purchase is written off over, in (0, 20].
        watts_per_gpu: power per busy GPU with its share of the server, W,
            in [0, 1e5].
        idle_watts_per_gpu: power per idle GPU with its share of the server,
            W, in [0, watts_per_gpu].
        pue: power usage effectiveness of the machine room, in [1, 5].
        price_per_kwh: electricity, dollars per kWh, in [0, 10].
        ops_fraction_per_year: staff, support and spares per year as a
            fraction of the IT purchase (server, fabric, storage), in [0, 5].

    Returns:
        Dollars per GPU-hour: ``capital``, ``facility``, ``operations`` and
        ``idle_power`` are paid every hour and sum to ``fixed``; ``busy_power``
        is the whole draw of a busy GPU and ``power`` its extra over idle,
        paid only while the GPU works.
    """
    capex = check_float(
        "capex_per_gpu", capex_per_gpu, 0.0, _MAX_CAPEX, low_inclusive=False
    )
    fabric = check_float("fabric_per_gpu", fabric_per_gpu, 0.0, _MAX_CAPEX)
    storage = check_float("storage_per_gpu", storage_per_gpu, 0.0, _MAX_CAPEX)
    per_kw = check_float("facility_per_kw", facility_per_kw, 0.0, _MAX_CAPEX)
    f_years = check_float(
        "facility_lifetime_years",
        facility_lifetime_years,
        0.0,
        50.0,
        low_inclusive=False,
    )
    years = check_float(
        "lifetime_years", lifetime_years, 0.0, 20.0, low_inclusive=False
    )
    busy_w = check_float("watts_per_gpu", watts_per_gpu, 0.0, _MAX_POWER)
    idle_w = check_float("idle_watts_per_gpu", idle_watts_per_gpu, 0.0, busy_w)
    pue = check_float("pue", pue, 1.0, 5.0)
    kwh = check_float("price_per_kwh", price_per_kwh, 0.0, _MAX_KWH)
    ops = check_float("ops_fraction_per_year", ops_fraction_per_year, 0.0, 5.0)
    it_capex = capex + fabric + storage
    capital = it_capex / (years * HOURS_PER_YEAR)
    facility = per_kw * busy_w / 1000.0 / (f_years * HOURS_PER_YEAR)
    operations = it_capex * ops / HOURS_PER_YEAR
    wall = pue * kwh / 1000.0  # dollars per watt-hour drawn at the wall
    idle_power, busy_power = idle_w * wall, busy_w * wall
    fixed = capital + facility + operations + idle_power
    return {
        "capital": capital,
        "facility": facility,
        "operations": operations,
        "idle_power": idle_power,
        "fixed": fixed,
        "busy_power": busy_power,
        "power": busy_power - idle_power,
    }


def useful_hour_cost(utilization: float, **onprem) -> float:
    """Dollars per useful GPU-hour of an owned GPU busy a fraction of the time.

    Args:
        utilization: fraction of hours the GPU does useful work, in (0, 1].
        **onprem: the inputs of ``onprem_hourly``.

    Returns:
        ``fixed / utilization + power``, dollars per useful GPU-hour.
    """
    u = check_float("utilization", utilization, 0.0, 1.0, low_inclusive=False)
    cost = onprem_hourly(**onprem)
    return cost["fixed"] / u + cost["power"]


def breakeven_utilization(cloud_price_per_gpu_hour: float, **onprem) -> float:
    """The utilisation above which owning is cheaper than renting on demand.

    Args:
        cloud_price_per_gpu_hour: what a rented GPU-hour costs, dollars,
            in (0, 1000].
        **onprem: the inputs of ``onprem_hourly``.

    Returns:
        ``fixed / (cloud price - power)``, a fraction. A value above 1 means
        owning never pays, even at full use; ``math.inf`` when the cloud price
        does not even cover the owned GPU's extra power.
    """
    price = check_cloud_price(cloud_price_per_gpu_hour)
    cost = onprem_hourly(**onprem)
    margin = price - cost["power"]
    return math.inf if margin <= 0 else cost["fixed"] / margin


def run_cost(
    n_params: float,
    n_tokens: float,
    n_gpus: int,
    peak_flops: float,
    mfu: float,
    price_per_gpu_hour: float,
) -> dict:
    """The bill for one training run, from the 6·N·D rule.

    Args:
        n_params: model parameters, in (0, 1e15].
        n_tokens: training tokens, in (0, 1e16].
        n_gpus: GPUs used, in [1, 1e6].
        peak_flops: peak FLOP/s of one GPU, in (0, 1e17].
        mfu: model FLOPs utilisation, in (0, 1].
        price_per_gpu_hour: dollars per GPU-hour, in [0, 1000].

    Returns:
        ``{"seconds", "gpu_hours", "dollars"}`` for the run.
    """
    from clusterlab.models.compute import training_time

    seconds = training_time(n_params, n_tokens, n_gpus, peak_flops, mfu)
    price = check_float("price_per_gpu_hour", price_per_gpu_hour, 0.0, _MAX_HOURLY)
    gpu_hours = seconds / 3600.0 * n_gpus
    return {"seconds": seconds, "gpu_hours": gpu_hours, "dollars": gpu_hours * price}


__all__ = [
    "DEFAULTS",
    "DEFAULT_ROWS",
    "HOURS_PER_YEAR",
    "REFERENCE_ON_DEMAND",
    "REFERENCE_RESERVED",
    "breakeven_utilization",
    "cloud_price",
    "cloud_prices",
    "default_inputs",
    "default_sources",
    "onprem_hourly",
    "run_cost",
    "useful_hour_cost",
]
