"""Charts for the decision helper (the choosing lab and chapter).

The table they draw is ``cl.models.decide.decision_table``.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from clusterlab.core.chart_checks import check_columns

CHOICE_COLORS = {
    "GPU cluster": "#009E73",
    "distributed CPU": "#0072B2",
    "both": "#E69F00",
}


def decision_chart(df: pd.DataFrame, pick: str | None = None) -> alt.VConcatChart:
    """Cost per unit of work on a GPU relative to a CPU core, and the reasons.

    A radio button in the page picks a workload; the text below the bars lists
    the reasons for its recommendation. Works without a kernel.

    Args:
        df: ``cl.models.decide.decision_table``'s output.
        pick: the workload selected at first (default: the first one).
    """
    check_columns(
        df, ["workload", "choice", "job_speedup", "cost_ratio", "line", "reason"]
    )
    names = list(dict.fromkeys(df["workload"]))
    param = alt.param(
        name="workload_pick",
        value=pick or names[0],
        bind=alt.binding_radio(options=names, name="workload "),
    )
    bars_df = df[df["line"] == 0]
    color = alt.Color(
        "choice:N",
        title="recommendation",
        scale=alt.Scale(domain=list(CHOICE_COLORS), range=list(CHOICE_COLORS.values())),
    )
    # Points, not bars: a bar on a log axis has no zero to start from.
    bars = (
        alt.Chart(bars_df)
        .mark_circle(size=220, opacity=1)
        .encode(
            y=alt.Y("workload:N", sort=names, title=None),
            x=alt.X(
                "cost_ratio:Q",
                scale=alt.Scale(type="log"),
                title="GPU cost per unit of work ÷ CPU cost (log; < 1: GPU cheaper)",
            ),
            color=color,
            opacity=alt.condition(
                "datum.workload == workload_pick", alt.value(1.0), alt.value(0.35)
            ),
            tooltip=[
                "workload",
                "choice",
                alt.Tooltip("job_speedup:Q", format=",.1f", title="speedup"),
                alt.Tooltip("cost_ratio:Q", format=".3f"),
            ],
        )
    )
    even = alt.Chart(pd.DataFrame({"x": [1.0]})).mark_rule(color="#000").encode(x="x")
    reasons = (
        alt.Chart(df)
        .transform_filter("datum.workload == workload_pick")
        .mark_text(align="left", fontSize=13)
        .encode(
            x=alt.value(0),  # left-aligned at the start of the plot
            y=alt.Y("line:O", axis=None),
            text="reason:N",
        )
        .properties(width=500, height=110, title="Why (rule: reason)")
    )
    top = alt.layer(bars, even).properties(
        width=500,
        height=220,
        title=alt.TitleParams(
            "Which workloads belong on GPUs",
            subtitle=[
                "points: one GPU against one CPU core, per unit of work, at the "
                "prices given;",
                "pick a workload to read its reasons",
            ],
        ),
    )
    return alt.vconcat(top, reasons).add_params(param)


__all__ = ["decision_chart"]
