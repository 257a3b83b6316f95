"""Charts of the roofline: workloads against two roofs, and CPU cores for a stream.

Builders take tidy DataFrames (machines' measured or published roofs, and the
workload table of ``cl.models.roofline``) and return Altair charts whose
controls are Vega-Lite parameters, so they work in the static book too.
"""

from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Range
from clusterlab.models.roofline import attainable_flops


def roofline_points(machines: pd.DataFrame, workloads: pd.DataFrame) -> pd.DataFrame:
    """Each workload on each machine's roofline: attainable FLOP/s and the bound."""
    check_columns(machines, ["machine", "peak_flops", "bandwidth_Bps"])
    check_columns(workloads, ["workload", "intensity_flop_per_byte"])
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
    check_columns(machines, ["machine", "peak_flops", "bandwidth_Bps"])
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
        "machine:N",
        title="machine",
        sort=names,
        legend=alt.Legend(labelLimit=260, columns=2),
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


# The page's sliders of cores_chart (no live widget shares them).
LOG10_EVENTS = Range(
    "log_rate", min=3.0, max=7.0, step=0.05, default=5.3, label="log10 events/s "
)
UTILISATION = Range(
    "util", min=0.1, max=1.0, step=0.05, default=0.7, label="utilisation "
)


def cores_chart(
    events_per_s: float = 2e5,
    utilisation: float = 0.7,
    title: str = "CPU cores to keep up with a stream of events",
) -> alt.LayerChart:
    """Cores needed against CPU time per event; sliders set the rate and utilisation.

    ``cores = ceil(rate × cost / utilisation)`` (the utilisation law).
    """
    rate = LOG10_EVENTS.param(value=round(math.log10(events_per_s), 2))
    util = UTILISATION.param(value=utilisation)
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


__all__ = ["cores_chart", "roofline_chart", "roofline_points"]
