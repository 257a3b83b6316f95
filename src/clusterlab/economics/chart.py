"""Charts of owning against renting GPU-hours (the economics lab and chapter).

Every builder takes a DataFrame computed by ``cl.models.economics``,
``cl.models.breakeven`` or ``cl.models.cluster_capex`` and only draws it.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Range
from clusterlab.models.economics import DEFAULTS, HOURS_PER_YEAR, cloud_price

COST_AXIS = "cost per useful GPU-hour ($)"


UTIL_AXIS = "utilisation (fraction of hours with useful work)"


# The inputs both explorers put on sliders: the page's (breakeven_explorer) and
# the live widget's (cl.economics.widget.economics_explorer). Floats throughout:
# the live sliders are FloatSliders.
CLOUD_PRICE = Range(
    "cloud_price", min=1.0, max=8.0, step=0.05, default=round(cloud_price(), 2),
    label="cloud $/GPU-hour ", widget_label="cloud $/GPU-h",
)  # fmt: skip
CAPEX_PER_GPU = Range(
    "capex", min=10_000.0, max=60_000.0, step=500.0,
    default=round(DEFAULTS["capex_per_gpu"], -2),
    label="server $ per GPU ", widget_label="server $/GPU",
)  # fmt: skip
LIFETIME_YEARS = Range(
    "life", min=2.0, max=7.0, step=0.5, default=float(DEFAULTS["lifetime_years"]),
    label="lifetime (years) ",
)  # fmt: skip
PRICE_PER_KWH = Range(
    "kwh", min=0.03, max=0.40, step=0.005, default=DEFAULTS["price_per_kwh"],
    label="$ per kWh ",
)  # fmt: skip
BREAKEVEN_CONTROLS = (CLOUD_PRICE, CAPEX_PER_GPU, LIFETIME_YEARS, PRICE_PER_KWH)


def _start(spec: Range, value: float):
    """``spec``'s page parameter starting at ``value``, a figure of the inputs.

    The value is kept as given, even beyond the slider's ends: the curve the
    page first draws is the one of the inputs.
    """
    return alt.param(name=spec.name, value=value, bind=spec.binding())


EXPLORER_COLUMNS = [
    "cloud_price",
    "capex",
    "other_capex",
    "lifetime_years",
    "ops_fraction",
    "facility_hourly",
    "idle_kw_wall",
    "busy_kw_wall",
    "price_per_kwh",
]


def breakeven_explorer(
    inputs: pd.DataFrame, title: str = "Where owning starts to pay"
) -> alt.LayerChart:
    """Owned cost per useful GPU-hour against utilisation, with sliders in the page.

    The sliders (cloud price, server price per GPU, lifetime, electricity) are
    Vega-Lite parameters: the curve is recomputed in the browser from the same
    formula as ``cl.models.economics.useful_hour_cost``, with no kernel.

    Args:
        inputs: one row of ``cl.models.breakeven.explorer_inputs``; the
            sliders start at its values and the other terms stay fixed.
    """
    check_columns(inputs, EXPLORER_COLUMNS, "inputs")
    r = inputs.iloc[0]
    cloud = _start(CLOUD_PRICE, round(float(r["cloud_price"]), 2))
    capex = _start(CAPEX_PER_GPU, round(float(r["capex"]), -2))
    life = _start(LIFETIME_YEARS, float(r["lifetime_years"]))
    electricity = _start(PRICE_PER_KWH, round(float(r["price_per_kwh"]), 3))
    it = f"(capex + {r['other_capex']})"
    fixed = (
        f"({it} / (life * {HOURS_PER_YEAR}) + {it} * {r['ops_fraction']} / "
        f"{HOURS_PER_YEAR} + {r['facility_hourly']} + {r['idle_kw_wall']} * kwh)"
    )
    power = f"(({r['busy_kw_wall']} - {r['idle_kw_wall']}) * kwh)"
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
        .add_params(cloud, capex, life, electricity)
        .properties(
            width=520,
            height=300,
            title=alt.TitleParams(
                title,
                subtitle="blue: an owned GPU's cost per useful hour (idle power, "
                "fabric, storage and facility included); dashed: the cloud price",
            ),
        )
    )


def useful_hour_chart(df: pd.DataFrame, title: str | None = None) -> alt.Chart:
    """Bars of the owned cost per useful GPU-hour at a few utilisations.

    Args:
        df: ``cl.models.breakeven.useful_hour_table`` rows (columns ``u`` and
            ``owned``).
    """
    check_columns(df, ["u", "owned"])
    data = df.assign(utilisation=[f"{u:.0%}" for u in df["u"]])
    return (
        alt.Chart(data)
        .mark_bar(color="#0072B2")
        .encode(
            x=alt.X("utilisation:N", title="utilisation", sort=None),
            y=alt.Y("owned:Q", title=COST_AXIS),
            tooltip=[alt.Tooltip("owned:Q", format="$.2f")],
        )
        .properties(
            width=260,
            height=220,
            title=title or "The same owned GPU at different utilisations",
        )
    )


def breakeven_sweep_chart(df: pd.DataFrame, title: str | None = None) -> alt.Chart:
    """Break-even utilisation against cloud price, one line per lifetime.

    Args:
        df: ``cl.models.breakeven.breakeven_table`` (columns ``cloud_price``,
            ``breakeven`` and ``lifetime_years``).
    """
    check_columns(df, ["cloud_price", "breakeven", "lifetime_years"])
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


def useful_hour_curve(df: pd.DataFrame, here: pd.DataFrame | None = None):
    """The owned cost per useful hour against the cloud price, over utilisation.

    Args:
        df: ``cl.models.breakeven.useful_hour_table`` (columns ``u``, ``owned``
            and ``cloud``).
        here: an optional row with ``u`` and ``owned`` to mark on the curve.
    """
    check_columns(df, ["u", "owned", "cloud"])
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
    if here is not None:
        check_columns(here, ["u", "owned"], "here")
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


def capex_chart(df: pd.DataFrame, title: str | None = None) -> alt.Chart:
    """Stacked bars of a cluster's up-front cost, one bar per server price.

    Args:
        df: ``cl.models.cluster_capex.e1_capex_table`` (columns ``node_item``,
            ``with_facility``, ``servers``, ``fabric``, ``storage``,
            ``facility``).
    """
    terms = ["servers", "fabric", "storage", "facility"]
    check_columns(df, ["node_item", "with_facility", *terms])
    data = df.assign(
        option=df["node_item"]
        + np.where(df["with_facility"], " + facility", " (colocated)")
    ).melt(id_vars=["option"], value_vars=terms, var_name="term", value_name="usd")
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            y=alt.Y("option:N", title=None, sort=None),
            x=alt.X(
                "sum(usd):Q", title="up-front cost ($)", axis=alt.Axis(format="$~s")
            ),
            color=alt.Color("term:N", title="term", sort=terms),
            order=alt.Order("term_order:Q"),
            tooltip=["option", "term", alt.Tooltip("usd:Q", format="$,.0f")],
        )
        .transform_calculate(
            term_order="indexof(['servers','fabric','storage','facility'], datum.term)"
        )
        .properties(
            width=460,
            height=240,
            title=alt.TitleParams(
                title or "What 512 H100 cost up front, term by term",
                subtitle="one bar per published server price; facility: fit-out "
                "for the servers' maximum draw",
            ),
        )
    )


__all__ = [
    "breakeven_explorer",
    "breakeven_sweep_chart",
    "capex_chart",
    "useful_hour_chart",
    "useful_hour_curve",
]
