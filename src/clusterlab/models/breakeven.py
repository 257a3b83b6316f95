"""The break-even curve and tables that the economics charts draw, and a ledger.

Sweeps of ``cl.models.economics`` over utilisation, cloud price and lifetime,
returned as DataFrames so that ``cl.economics.chart`` only draws.

``lifetime_ledger`` checks the hourly model another way: it adds up every
dollar an owned GPU costs over its whole life (the purchase, operations each
year, its share of the facility, and the electricity of each hour, busy or
idle) and divides by the hours it worked. ``ledger_breakeven`` finds by
bisection the utilisation at which that total per useful hour meets a cloud
price. Neither uses ``onprem_hourly``'s per-hour terms.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from clusterlab.core.validate import check_float
from clusterlab.models.economics import (
    DEFAULTS,
    HOURS_PER_YEAR,
    breakeven_utilization,
    check_cloud_price,
    onprem_hourly,
    useful_hour_cost,
)


def useful_hour_table(cloud_price_per_gpu_hour: float, utilizations, **onprem):
    """Owned and rented cost per useful GPU-hour over a grid of utilisations.

    Args:
        cloud_price_per_gpu_hour: dollars per rented GPU-hour, in (0, 1000].
        utilizations: fractions in (0, 1].
        **onprem: the inputs of ``onprem_hourly``.

    Returns:
        A DataFrame with columns ``u``, ``owned`` and ``cloud`` (dollars per
        useful GPU-hour).
    """
    price = check_cloud_price(cloud_price_per_gpu_hour)
    us = [float(u) for u in utilizations]
    owned = [useful_hour_cost(u, **onprem) for u in us]
    return pd.DataFrame({"u": us, "owned": owned, "cloud": price})


def breakeven_table(cloud_prices, lifetimes_years, **onprem) -> pd.DataFrame:
    """Break-even utilisation for each cloud price and lifetime.

    Args:
        cloud_prices: dollars per rented GPU-hour, each in (0, 1000].
        lifetimes_years: write-off periods, each in (0, 20].
        **onprem: the other inputs of ``onprem_hourly``.

    Returns:
        A DataFrame with columns ``cloud_price``, ``lifetime_years`` and
        ``breakeven`` (a fraction; above 1 owning never pays).
    """
    rows = [
        {
            "cloud_price": float(p),
            "lifetime_years": float(y),
            "breakeven": breakeven_utilization(p, **{**onprem, "lifetime_years": y}),
        }
        for y in lifetimes_years
        for p in cloud_prices
    ]
    return pd.DataFrame(rows)


def explorer_inputs(cloud_price_per_gpu_hour: float, **onprem) -> pd.DataFrame:
    """The one-row table the in-page break-even explorer recomputes from.

    The explorer's sliders move the cloud price, the server's price per GPU,
    the lifetime and the electricity price; the other terms are held here.

    Returns:
        A DataFrame with ``cloud_price``, ``capex`` (server per GPU, $),
        ``other_capex`` (fabric and storage per GPU, $), ``lifetime_years``,
        ``ops_fraction``, ``facility_hourly`` ($ per GPU-hour), ``idle_kw_wall``
        and ``busy_kw_wall`` (kW at the wall, PUE included), ``price_per_kwh``.
    """
    inputs = {**DEFAULTS, **onprem}
    cost = onprem_hourly(**inputs)
    price = check_cloud_price(cloud_price_per_gpu_hour)
    row = {
        "cloud_price": price,
        "capex": inputs["capex_per_gpu"],
        "other_capex": inputs["fabric_per_gpu"] + inputs["storage_per_gpu"],
        "lifetime_years": inputs["lifetime_years"],
        "ops_fraction": inputs["ops_fraction_per_year"],
        "facility_hourly": cost["facility"],
        "idle_kw_wall": inputs["idle_watts_per_gpu"] / 1000 * inputs["pue"],
        "busy_kw_wall": inputs["watts_per_gpu"] / 1000 * inputs["pue"],
        "price_per_kwh": inputs["price_per_kwh"],
    }
    return pd.DataFrame([row])


def lifetime_ledger(utilization: float, **onprem) -> dict:
    """Every dollar one owned GPU costs over its life, added up hour by hour.

    Args:
        utilization: fraction of its hours the GPU works, in [0, 1].
        **onprem: the inputs of ``onprem_hourly`` (defaults: ``DEFAULTS``).

    Returns:
        Dollars over the lifetime: ``purchase`` (server share, fabric,
        storage), ``operations``, ``facility`` (its share of the fit-out for
        the years it is used), ``electricity`` (each hour at the busy or idle
        draw times the PUE) and ``total``; ``busy_hours``; and
        ``per_useful_hour`` (total / busy hours; inf when it never works).
    """
    u = check_float("utilization", utilization, 0.0, 1.0)
    x = {**DEFAULTS, **onprem}
    onprem_hourly(**x)  # the same argument checks
    hours = round(x["lifetime_years"] * HOURS_PER_YEAR)
    busy = np.arange(hours) < round(u * hours)  # which hours does not matter
    watts = np.where(busy, x["watts_per_gpu"], x["idle_watts_per_gpu"])
    electricity = float(watts.sum()) / 1000.0 * x["pue"] * x["price_per_kwh"]
    purchase = x["capex_per_gpu"] + x["fabric_per_gpu"] + x["storage_per_gpu"]
    years = x["lifetime_years"]
    operations = purchase * x["ops_fraction_per_year"] * years
    fit_out = x["facility_per_kw"] * x["watts_per_gpu"] / 1000.0
    facility = fit_out * years / x["facility_lifetime_years"]
    total = purchase + operations + facility + electricity
    n_busy = int(busy.sum())
    return {
        "purchase": purchase,
        "operations": operations,
        "facility": facility,
        "electricity": electricity,
        "total": total,
        "busy_hours": n_busy,
        "per_useful_hour": total / n_busy if n_busy else float("inf"),
    }


def ledger_breakeven(cloud_price_per_gpu_hour: float, **onprem) -> float:
    """The utilisation at which the ledger's cost per useful hour meets a price.

    Args:
        cloud_price_per_gpu_hour: dollars per rented GPU-hour, in (0, 1000].
        **onprem: the inputs of ``onprem_hourly``.

    Returns:
        A fraction in (0, 1], found by bisection to one hour of the lifetime;
        ``math.inf`` when even a GPU busy every hour costs more per useful
        hour than the cloud price (owning never pays).
    """
    price = check_cloud_price(cloud_price_per_gpu_hour)
    if lifetime_ledger(1.0, **onprem)["per_useful_hour"] > price:
        return float("inf")
    low, high = 0.0, 1.0  # owning costs more at low, less (or equal) at high
    for _ in range(40):
        mid = (low + high) / 2
        if lifetime_ledger(mid, **onprem)["per_useful_hour"] > price:
            low = mid
        else:
            high = mid
    return high


__all__ = [
    "breakeven_table",
    "explorer_inputs",
    "ledger_breakeven",
    "lifetime_ledger",
    "useful_hour_table",
]
