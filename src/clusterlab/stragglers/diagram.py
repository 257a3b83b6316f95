"""A straggler at the barrier, as a picture.

``straggler_diagram`` draws one step that the caller simulated
(``cl.stragglers.sim.straggler_bars``): every worker's compute time and the
wait at the all-reduce barrier for the slowest.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.diagram import lane_diagram


def straggler_diagram(bars: pd.DataFrame):
    """One step's bars (``cl.stragglers.sim.straggler_bars``), the barrier marked."""
    check_columns(bars, ["lane", "start", "end", "kind", "label"], "bars")
    n_workers = bars["lane"].nunique()
    barrier = bars["end"].max()
    chart = lane_diagram(
        bars,
        title=f"A step is a maximum: {n_workers} workers wait for the slowest",
        subtitle=f"the barrier (the all-reduce) starts at {barrier:.0f} ms",
        x_title="time in the step (ms)",
        size=(560, 200),
    )
    rule = (
        alt.Chart(pd.DataFrame({"x": [barrier]}))
        .mark_rule(color="black", strokeDash=[4, 3], strokeWidth=2)
        .encode(x="x:Q")
    )
    return alt.layer(chart, rule)


__all__ = ["straggler_diagram"]
