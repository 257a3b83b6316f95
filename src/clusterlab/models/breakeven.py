"""The break-even curve and tables that the economics charts draw.

Sweeps of ``cl.models.economics`` over utilisation, cloud price and lifetime,
returned as DataFrames so that ``cl.viz.economics`` only draws.
"""

from __future__ import annotations

import pandas as pd

from .._validate import check_float
from .economics import (
    _MAX_HOURLY,
    DEFAULTS,
    breakeven_utilization,
    onprem_hourly,
    useful_hour_cost,
)

__all__ = ["breakeven_table", "explorer_inputs", "useful_hour_table"]


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
    price = check_float(
        "cloud_price_per_gpu_hour",
        cloud_price_per_gpu_hour,
        0.0,
        _MAX_HOURLY,
        low_inclusive=False,
    )
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
    price = check_float(
        "cloud_price_per_gpu_hour",
        cloud_price_per_gpu_hour,
        0.0,
        _MAX_HOURLY,
        low_inclusive=False,
    )
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
