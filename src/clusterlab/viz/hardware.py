"""Charts of cluster hardware: links, collective bandwidth and the roofline.

Builders take tidy DataFrames (measurements from ``cl.perf`` or published
tables from ``cl.published.load``) and return Altair charts. Charts meant for
the static book carry Vega-Lite parameters bound to sliders or radio buttons,
so they stay interactive without a kernel; nothing here measures or prints.
"""

from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from ..models.roofline import attainable_flops
from .messages import _check_columns as _check

__all__ = [
    "busbw_model_chart",
    "busbw_vs_published_chart",
    "cores_chart",
    "link_rates_chart",
    "published_busbw_chart",
    "roofline_chart",
    "roofline_points",
]

SIZE_AXIS = "message size (bytes, log scale)"
BUSBW_AXIS = "bus bandwidth (GB/s, log scale)"


def busbw_vs_published_chart(
    measured: pd.DataFrame,
    published: pd.DataFrame,
    title: str = "This machine's collectives beside published GPU all-reduce",
) -> alt.LayerChart:
    """Measured bus bandwidth per op (lines) and published GPU points, log–log."""
    _check(measured, ["op", "size_bytes", "busbw_Bps"])
    _check(published, ["system", "size_bytes", "busbw_Bps", "source"])
    here = measured.assign(busbw_GBps=measured["busbw_Bps"] / 1e9)
    pub = published.dropna(subset=["size_bytes"])
    pub = pub.assign(busbw_GBps=pub["busbw_Bps"] / 1e9)
    x = alt.X("size_bytes:Q", scale=alt.Scale(type="log"), title=SIZE_AXIS)
    y = alt.Y("busbw_GBps:Q", scale=alt.Scale(type="log"), title=BUSBW_AXIS)
    lines = (
        alt.Chart(here)
        .mark_line(point=True)
        .encode(
            x=x,
            y=y,
            color=alt.Color("op:N", title="measured here"),
            tooltip=[
                "op",
                alt.Tooltip("size_bytes:Q", format=","),
                alt.Tooltip("busbw_GBps:Q", title="GB/s", format=".3f"),
            ],
        )
    )
    points = (
        alt.Chart(pub)
        .mark_point(shape="diamond", size=140, filled=True, color="#000")
        .encode(
            x=x,
            y=y,
            tooltip=[
                "system",
                alt.Tooltip("size_bytes:Q", format=","),
                alt.Tooltip("busbw_GBps:Q", title="GB/s", format=".0f"),
                "source",
            ],
        )
    )
    labels = points.mark_text(align="right", dx=-10, dy=-10, fontSize=11).encode(
        text="system:N"
    )
    return alt.layer(lines, points, labels).properties(
        title=alt.TitleParams(
            title,
            subtitle="lines: busbw measured on this machine; black diamonds: "
            "published 8-GPU H100 all-reduce (data/collective_busbw_published.csv)",
        )
    )


def busbw_model_chart(
    alpha_s: float,
    beta_Bps: float,
    measured: pd.DataFrame | None = None,
    world_size: int = 2,
    interactive: bool = True,
    title: str = "Ring all-reduce: bus bandwidth grows with message size",
) -> alt.LayerChart:
    """The ring all-reduce's busbw under alpha–beta, with optional measured points.

    ``t = 2(n−1)·α + 2(n−1)/n · S/β`` and ``busbw = 2(n−1)/n · S / t``. With
    ``interactive`` the world size, α and β are sliders in the page.
    """
    n_bind = alt.binding_range(min=2, max=64, step=1, name="world size n ")
    a_bind = alt.binding_range(min=-7, max=-2, step=0.05, name="log10 α (s) ")
    b_bind = alt.binding_range(min=8, max=12, step=0.05, name="log10 β (B/s) ")

    def bound(bind):  # a fixed value for the live widget, a control in the page
        return {"bind": bind} if interactive else {}

    n = alt.param(name="n", value=world_size, **bound(n_bind))
    la = alt.param(name="log_a", value=round(math.log10(alpha_s), 2), **bound(a_bind))
    lb = alt.param(name="log_b", value=round(math.log10(beta_Bps), 2), **bound(b_bind))
    x = alt.X(
        "size_bytes:Q", scale=alt.Scale(type="log", domain=[16, 2**34]), title=SIZE_AXIS
    )
    y = alt.Y(
        "busbw_GBps:Q",
        scale=alt.Scale(type="log", domain=[1e-6, 1e3], clamp=True),
        title=BUSBW_AXIS,
    )
    grid = alt.sequence(1.2, 10.3, 0.05, as_="log_s")
    line = (
        alt.Chart(grid)
        .transform_calculate(
            size_bytes="pow(10, datum.log_s)",
            t="2 * (n - 1) * pow(10, log_a) + 2 * (n - 1) / n * "
            "pow(10, datum.log_s) / pow(10, log_b)",
            busbw_GBps="2 * (n - 1) / n * pow(10, datum.log_s) / datum.t / 1e9",
        )
        .mark_line(color="#000", strokeDash=[6, 3])
        .encode(x=x, y=y)
    )
    ceiling = (
        alt.Chart(pd.DataFrame({"k": [0]}))
        .transform_calculate(busbw_GBps="pow(10, log_b) / 1e9")
        .mark_rule(color="#D55E00")
        .encode(y=y)
    )
    layers = [line, ceiling]
    if measured is not None:
        _check(measured, ["size_bytes", "busbw_Bps"])
        pts = measured.assign(busbw_GBps=measured["busbw_Bps"] / 1e9)
        layers.append(
            alt.Chart(pts)
            .mark_point(color="#0072B2")
            .encode(
                x=x,
                y=y,
                tooltip=[
                    alt.Tooltip("size_bytes:Q", format=","),
                    alt.Tooltip("busbw_GBps:Q", title="GB/s", format=".3f"),
                ],
            )
        )
    sub = "dashed: model busbw; red rule: β, the ceiling; points: measured here"
    return (
        alt.layer(*layers)
        .add_params(n, la, lb)
        .properties(title=alt.TitleParams(title, subtitle=sub))
    )


def link_rates_chart(
    rates: pd.DataFrame, title: str = "Link rates, per direction or both together"
) -> alt.Chart:
    """Bars of each link's rate; a radio button switches per-direction/both counts."""
    _check(rates, ["link", "scope", "per_direction_Bps", "both_directions_Bps"])
    data = rates[["link", "scope", "per_direction_Bps", "both_directions_Bps"]]
    pick = alt.param(
        name="count",
        value="per direction",
        bind=alt.binding_radio(
            options=["per direction", "both directions"], name="count "
        ),
    )
    return (
        alt.Chart(data)
        .transform_calculate(
            rate_GBps="(count == 'per direction' ? datum.per_direction_Bps"
            " : datum.both_directions_Bps) / 1e9",
            base_GBps="5",  # a log axis has no zero: bars start at its left edge
        )
        .mark_bar()
        .encode(
            y=alt.Y("link:N", sort="-x", title=None, axis=alt.Axis(labelLimit=320)),
            x=alt.X(
                "rate_GBps:Q",
                scale=alt.Scale(type="log", domain=[5, 2000]),
                title="rate (GB/s, log scale)",
            ),
            x2="base_GBps:Q",
            color=alt.Color(
                "scope:N",
                title="where the link sits",
                legend=alt.Legend(orient="bottom", labelLimit=320),
            ),
            tooltip=["link", "scope", alt.Tooltip("rate_GBps:Q", format=".1f")],
        )
        .add_params(pick)
        .properties(
            title=alt.TitleParams(
                title,
                subtitle="vendors often quote both directions added together; "
                "a transfer one way sees the per-direction rate",
            ),
            height=240,
        )
    )


def published_busbw_chart(
    published: pd.DataFrame,
    title: str = "Published all-reduce bus bandwidth against the link rate",
) -> alt.LayerChart:
    """Bars of published busbw per system, ticks at each link's per-direction rate."""
    _check(published, ["system", "op", "busbw_Bps", "link_per_direction_Bps"])
    data = published.assign(
        label=published["system"]
        + " · "
        + published["op"]
        + published["size_bytes"].map(
            lambda s: "" if pd.isna(s) else f" · {s / 1e6:,.0f} MB"
        ),
        busbw_GBps=published["busbw_Bps"] / 1e9,
        link_GBps=published["link_per_direction_Bps"] / 1e9,
        share=published["busbw_Bps"] / published["link_per_direction_Bps"],
    )
    y = alt.Y("label:N", title=None, sort=None, axis=alt.Axis(labelLimit=400))
    bars = (
        alt.Chart(data)
        .mark_bar(color="#0072B2")
        .encode(
            y=y,
            x=alt.X("busbw_GBps:Q", title="bus bandwidth (GB/s)"),
            tooltip=[
                "system",
                alt.Tooltip("busbw_GBps:Q", format=".0f"),
                alt.Tooltip("share:Q", title="of link", format=".0%"),
                "source",
            ],
        )
    )
    ticks = (
        alt.Chart(data)
        .mark_tick(color="#D55E00", thickness=3, size=22)
        .encode(y=y, x="link_GBps:Q")
    )
    return alt.layer(bars, ticks).properties(
        title=alt.TitleParams(
            title,
            subtitle="bars: published busbw; orange ticks: NVLink per-direction "
            "rate of the part (data/collective_busbw_published.csv)",
        ),
        height=220,
    )


def roofline_points(machines: pd.DataFrame, workloads: pd.DataFrame) -> pd.DataFrame:
    """Each workload on each machine's roofline: attainable FLOP/s and the bound."""
    _check(machines, ["machine", "peak_flops", "bandwidth_Bps"])
    _check(workloads, ["workload", "intensity_flop_per_byte"])
    rows = []
    for m in machines.itertuples():
        att = attainable_flops(
            workloads["intensity_flop_per_byte"].to_numpy(),
            m.peak_flops,
            m.bandwidth_Bps,
        )
        ridge = m.peak_flops / m.bandwidth_Bps
        for w, i, a in zip(
            workloads["workload"],
            workloads["intensity_flop_per_byte"],
            att,
            strict=True,
        ):
            bound = "memory" if i < ridge else "compute"
            rows.append((m.machine, w, i, a, bound))
    return pd.DataFrame(
        rows,
        columns=[
            "machine",
            "workload",
            "intensity_flop_per_byte",
            "attainable_flops",
            "bound",
        ],
    )


def roofline_chart(
    machines: pd.DataFrame,
    workloads: pd.DataFrame,
    selected: str | None = None,
    title: str = "The roofline: attainable FLOP/s against arithmetic intensity",
) -> alt.LayerChart:
    """Rooflines of several machines and the workloads placed on one of them.

    A radio button in the page picks the machine whose roofline the workload
    points sit on; the others fade.
    """
    _check(machines, ["machine", "peak_flops", "bandwidth_Bps"])
    names = list(machines["machine"])
    selected = selected if selected in names else names[0]
    # On log axes a roofline is two straight pieces: three points draw it exactly.
    lines = pd.concat(
        [
            pd.DataFrame(
                {
                    "machine": m.machine,
                    "intensity_flop_per_byte": grid,
                    "attainable_flops": attainable_flops(
                        grid, m.peak_flops, m.bandwidth_Bps
                    ),
                }
            )
            for m in machines.itertuples()
            for grid in [np.array([1e-3, m.peak_flops / m.bandwidth_Bps, 1e4])]
        ],
        ignore_index=True,
    )
    pts = roofline_points(machines, workloads)
    pick = alt.selection_point(
        fields=["machine"],
        value=selected,
        bind=alt.binding_radio(options=names, name="machine "),
    )
    x = alt.X(
        "intensity_flop_per_byte:Q",
        scale=alt.Scale(type="log"),
        title="arithmetic intensity (FLOP per byte, log scale)",
    )
    y = alt.Y(
        "attainable_flops:Q",
        scale=alt.Scale(type="log"),
        axis=alt.Axis(format="~s"),
        title="attainable FLOP/s (log scale; G = 1e9, T = 1e12, P = 1e15)",
    )
    color = alt.Color(
        "machine:N", title="machine", sort=names, legend=alt.Legend(labelLimit=320)
    )
    roofs = (
        alt.Chart(lines)
        .mark_line()
        .encode(
            x=x,
            y=y,
            color=color,
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.2)),
        )
        .add_params(pick)
    )
    on_pick = alt.Chart(pts).transform_filter(pick)
    dots = on_pick.mark_point(size=90, color="#000", filled=True).encode(
        x=x,
        y=y,
        shape=alt.Shape("bound:N", title="limited by"),
        tooltip=[
            "workload",
            "machine",
            alt.Tooltip("intensity_flop_per_byte:Q", format=".3g"),
            alt.Tooltip("attainable_flops:Q", format=".3e"),
            "bound",
        ],
    )
    text = on_pick.mark_text(align="left", dx=7, dy=-7, fontSize=11).encode(
        x=x, y=y, text="workload:N"
    )
    return alt.layer(roofs, dots, text).properties(
        title=alt.TitleParams(
            title,
            subtitle="each roof is min(peak FLOP/s, intensity × bandwidth); "
            "black points: the workloads on the picked machine",
        ),
        height=340,
    )


def cores_chart(
    events_per_s: float = 2e5,
    utilisation: float = 0.7,
    title: str = "CPU cores to keep up with a stream of events",
) -> alt.LayerChart:
    """Cores needed against CPU time per event; sliders set the rate and utilisation.

    ``cores = ceil(rate × cost / utilisation)`` (the utilisation law).
    """
    rate = alt.param(
        name="log_rate",
        value=round(math.log10(events_per_s), 2),
        bind=alt.binding_range(min=3, max=7, step=0.05, name="log10 events/s "),
    )
    util = alt.param(
        name="util",
        value=utilisation,
        bind=alt.binding_range(min=0.1, max=1.0, step=0.05, name="utilisation "),
    )
    grid = alt.sequence(-7, -1.95, 0.05, as_="log_cost")
    line = (
        alt.Chart(grid)
        .transform_calculate(
            cost_s="pow(10, datum.log_cost)",
            cores="max(1, ceil(pow(10, log_rate) * pow(10, datum.log_cost) / util))",
        )
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X(
                "cost_s:Q",
                scale=alt.Scale(type="log"),
                axis=alt.Axis(format=".0e"),
                title="CPU time per event (s, log scale)",
            ),
            y=alt.Y(
                "cores:Q",
                scale=alt.Scale(type="log", domain=[1, 1e6]),
                title="cores needed (log scale)",
            ),
            tooltip=[
                alt.Tooltip("cost_s:Q", format=".2e"),
                alt.Tooltip("cores:Q", format=","),
            ],
        )
    )
    node = (
        alt.Chart(pd.DataFrame({"cores": [64], "what": ["one 64-core node"]}))
        .mark_rule(color="#D55E00", strokeDash=[4, 3])
        .encode(y="cores:Q", tooltip=["what"])
    )
    return (
        alt.layer(line, node)
        .add_params(rate, util)
        .properties(
            title=alt.TitleParams(
                title,
                subtitle="cores = ceil(events/s × seconds per event / utilisation); "
                "dashed: one 64-core node",
            )
        )
    )
