"""Charts of owning against renting GPU-hours (the economics lab and chapter)."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ..models.economics import DEFAULTS, HOURS_PER_YEAR, useful_hour_cost

__all__ = [
    "breakeven_explorer",
    "breakeven_sweep_chart",
    "useful_hour_chart",
    "useful_hour_curve",
]

COST_AXIS = "cost per useful GPU-hour ($)"
UTIL_AXIS = "utilisation (fraction of hours with useful work)"


def breakeven_explorer(
    cloud_price: float = 2.50, title: str = "Where owning starts to pay"
) -> alt.LayerChart:
    """Owned cost per useful GPU-hour against utilisation, with sliders in the page.

    The sliders (cloud price, purchase price per GPU, lifetime, electricity) are
    Vega-Lite parameters: the curve is recomputed in the browser from the same
    formula as ``cl.models.economics.useful_hour_cost``, with no kernel.
    """
    price = alt.param(
        name="cloud_price",
        value=cloud_price,
        bind=alt.binding_range(min=1, max=8, step=0.1, name="cloud $/GPU-hour "),
    )
    capex = alt.param(
        name="capex",
        value=round(DEFAULTS["capex_per_gpu"], -2),
        bind=alt.binding_range(
            min=10_000, max=60_000, step=500, name="purchase $ per GPU "
        ),
    )
    life = alt.param(
        name="life",
        value=DEFAULTS["lifetime_years"],
        bind=alt.binding_range(min=2, max=7, step=0.5, name="lifetime (years) "),
    )
    kwh = alt.param(
        name="kwh",
        value=DEFAULTS["price_per_kwh"],
        bind=alt.binding_range(min=0.03, max=0.40, step=0.01, name="$ per kWh "),
    )
    ops = DEFAULTS["ops_fraction_per_year"]
    kw_wall = DEFAULTS["watts_per_gpu"] / 1000 * DEFAULTS["pue"]
    fixed = f"(capex / (life * {HOURS_PER_YEAR}) + capex * {ops} / {HOURS_PER_YEAR})"
    power = f"({kw_wall} * kwh)"
    grid = alt.sequence(0.05, 1.0001, 0.01, as_="u")
    x = alt.X("u:Q", title=UTIL_AXIS, scale=alt.Scale(domain=[0, 1]))
    y = alt.Y("cost:Q", title=COST_AXIS, scale=alt.Scale(domain=[0, 12], clamp=True))
    owned = (
        alt.Chart(grid)
        .transform_calculate(cost=f"{fixed} / datum.u + {power}")
        .transform_filter("datum.cost <= 12")  # off the chart, not a plateau
        .mark_line(color="#0072B2", strokeWidth=3)
        .encode(x=x, y=y)
    )
    rented = (
        alt.Chart(grid)
        .transform_calculate(cost="cloud_price")
        .mark_line(color="#D55E00", strokeDash=[6, 3], strokeWidth=2)
        .encode(x=x, y=y)
    )
    mark = (
        alt.Chart(alt.sequence(0, 1, 1, as_="i"))
        .transform_calculate(
            u=f"{fixed} / max(cloud_price - {power}, 1e-9)", cost="cloud_price"
        )
        .transform_calculate(
            label="datum.u <= 1 ? 'break-even ' + format(datum.u, '.0%') "
            ": 'owning never pays'",
            u="min(datum.u, 1)",
        )
        .mark_text(align="right", dx=-6, dy=-10, fontWeight="bold")
        .encode(x=x, y=y, text="label:N")
    )
    return (
        alt.layer(owned, rented, mark)
        .add_params(price, capex, life, kwh)
        .properties(
            width=520,
            height=300,
            title=alt.TitleParams(
                title,
                subtitle="blue: an owned GPU's cost per useful hour; dashed: the "
                "cloud price; they cross at the break-even utilisation",
            ),
        )
    )


def useful_hour_chart(
    utilizations=(0.35, 0.85), title: str = "The same GPU, busy 35% or 85% of hours"
) -> alt.Chart:
    """Bars of the owned cost per useful GPU-hour at a few utilisations (defaults)."""
    rows = [
        {"utilisation": f"{u:.0%}", "cost": useful_hour_cost(u)} for u in utilizations
    ]
    return (
        alt.Chart(pd.DataFrame(rows))
        .mark_bar(color="#0072B2")
        .encode(
            x=alt.X("utilisation:N", title="utilisation", sort=None),
            y=alt.Y("cost:Q", title=COST_AXIS),
            tooltip=[alt.Tooltip("cost:Q", format="$.2f")],
        )
        .properties(width=260, height=220, title=title)
    )


def breakeven_sweep_chart(df: pd.DataFrame, title: str | None = None) -> alt.Chart:
    """Break-even utilisation against cloud price, one line per lifetime.

    Args:
        df: columns ``cloud_price``, ``breakeven`` and ``lifetime_years``.
    """
    missing = {"cloud_price", "breakeven", "lifetime_years"} - set(df.columns)
    if missing:
        raise ValueError(f"df lacks the columns {sorted(missing)}")
    data = df.assign(breakeven=np.minimum(df["breakeven"], 1.2))
    half = alt.Chart(pd.DataFrame({"y": [0.5]})).mark_rule(color="#999").encode(y="y")
    lines = (
        alt.Chart(data)
        .mark_line()
        .encode(
            x=alt.X("cloud_price:Q", title="cloud price ($ per GPU-hour)"),
            y=alt.Y(
                "breakeven:Q",
                title="break-even utilisation",
                scale=alt.Scale(domain=[0, 1.2]),
                axis=alt.Axis(format="%"),
            ),
            color=alt.Color("lifetime_years:N", title="lifetime (years)"),
            tooltip=[
                alt.Tooltip("cloud_price:Q", format="$.2f"),
                alt.Tooltip("breakeven:Q", format=".0%"),
                "lifetime_years:N",
            ],
        )
    )
    return alt.layer(half, lines).properties(
        width=460,
        height=260,
        title=alt.TitleParams(
            title or "Break-even utilisation falls as the cloud price rises",
            subtitle="grey line: 50%; above 100% owning never pays",
        ),
    )


def useful_hour_curve(
    cloud_price: float, utilization: float | None = None, **onprem
) -> alt.LayerChart:
    """The owned cost per useful hour (from the model) against the cloud price.

    Args:
        cloud_price: dollars per rented GPU-hour.
        utilization: a utilisation to mark on the curve, or None.
        **onprem: the inputs of ``cl.models.economics.onprem_hourly``.
    """
    u = np.linspace(0.05, 1.0, 96)
    df = pd.DataFrame(
        {"u": u, "owned": [useful_hour_cost(x, **onprem) for x in u]}
    ).assign(cloud=cloud_price)
    x = alt.X("u:Q", title=UTIL_AXIS, scale=alt.Scale(domain=[0, 1]))
    y_scale = alt.Scale(domain=[0, 12], clamp=True)
    base = alt.Chart(df)
    layers = [
        base.mark_line(color="#0072B2", strokeWidth=3).encode(
            x=x, y=alt.Y("owned:Q", title=COST_AXIS, scale=y_scale)
        ),
        base.mark_line(color="#D55E00", strokeDash=[6, 3]).encode(
            x=x, y=alt.Y("cloud:Q", scale=y_scale)
        ),
    ]
    if utilization is not None:
        here = pd.DataFrame(
            {"u": [utilization], "owned": [useful_hour_cost(utilization, **onprem)]}
        )
        layers.append(
            alt.Chart(here)
            .mark_point(size=120, filled=True, color="#000")
            .encode(x=x, y=alt.Y("owned:Q", scale=y_scale))
        )
    return alt.layer(*layers).properties(
        width=520,
        height=300,
        title=alt.TitleParams(
            "Owned (blue) against rented (dashed) GPU-hours",
            subtitle="the black dot is the utilisation you chose",
        ),
    )
