"""Charts for debugging a distributed job: a step's timeline, ranks' step times.

Every builder takes a tidy DataFrame (from ``cl.debugging.profile`` or
``cl.debugging.timings``) and returns an Altair chart; nothing here runs or
computes anything beyond unit conversion.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from clusterlab.core.chart_checks import check_columns

_LANES = ["compute", "communication"]


def step_timeline_chart(
    events: pd.DataFrame,
    title: str = "One data-parallel step: where the all-reduce overlaps backward",
) -> alt.Chart:
    """A timeline: one row per rank and lane, one bar per profiler event.

    Args:
        events: columns ``rank, lane, name, start_s, end_s`` (``step_events``),
            optionally ``setting`` (one panel per setting, e.g. bucket size).
    """
    check_columns(events, ["rank", "lane", "name", "start_s", "end_s"], "events")
    data = pd.DataFrame(
        {
            "row": "rank " + events["rank"].astype(str) + " · " + events["lane"],
            "lane": events["lane"],
            "event": events["name"],
            "start_ms": (events["start_s"] * 1e3).round(3),
            "end_ms": (events["end_s"] * 1e3).round(3),
        }
    )
    facet = "setting" in events.columns
    if facet:
        data["setting"] = events["setting"].to_numpy()
    chart = (
        alt.Chart(data)
        .mark_bar(height=12)
        .encode(
            x=alt.X("start_ms:Q", title="time from the step's start (ms)"),
            x2="end_ms:Q",
            y=alt.Y("row:N", title=None, sort="ascending"),
            color=alt.Color(
                "lane:N",
                scale=alt.Scale(domain=_LANES),
                title="lane",
                legend=alt.Legend(orient="bottom"),
            ),
            tooltip=[
                "row",
                "event",
                alt.Tooltip("start_ms:Q", format=".2f"),
                alt.Tooltip("end_ms:Q", format=".2f"),
            ],
        )
        .properties(width=520, height=alt.Step(16))
    )
    if facet:
        return (
            chart.facet(row=alt.Row("setting:N", title=None))
            .properties(title=title)
            .resolve_scale(x="independent")
        )
    return chart.properties(title=title)


def step_times_chart(
    timings: pd.DataFrame,
    flagged=(),
    threshold_s: float | None = None,
    title: str = "Per-rank compute time per step: the slow rank stands out",
) -> alt.LayerChart:
    """Each rank's compute time per step (points) and its median (bar tick).

    Args:
        timings: columns ``rank, step, compute_s``.
        flagged: ranks the rule flagged, drawn in the warning colour.
        threshold_s: the rule's threshold (ratio × median), drawn as a line.
    """
    check_columns(timings, ["rank", "step", "compute_s"], "timings")
    data = pd.DataFrame(
        {
            "rank": timings["rank"].astype(int),
            "step": timings["step"].astype(int),
            "compute_ms": (timings["compute_s"] * 1e3).round(2),
        }
    ).dropna()
    data["verdict"] = data["rank"].map(
        lambda r: "flagged slow" if r in set(flagged) else "healthy"
    )
    colour = alt.Color(
        "verdict:N",
        scale=alt.Scale(domain=["healthy", "flagged slow"]),
        title="rule's verdict",
        legend=alt.Legend(orient="bottom"),
    )
    x = alt.X("rank:O", title="rank")
    y = alt.Y("compute_ms:Q", title="compute time per step (ms)")
    points = (
        alt.Chart(data)
        .mark_circle(size=40, opacity=0.6)
        .encode(x=x, y=y, color=colour, tooltip=["rank", "step", "compute_ms"])
    )
    medians = (
        alt.Chart(data)
        .mark_tick(thickness=3, size=30)
        .encode(x=x, y=alt.Y("median(compute_ms):Q"), color=colour)
    )
    layers = [points, medians]
    if threshold_s is not None:
        rule = pd.DataFrame({"threshold_ms": [round(threshold_s * 1e3, 2)]})
        layers.append(
            alt.Chart(rule)
            .mark_rule(strokeDash=[4, 4])
            .encode(y="threshold_ms:Q", tooltip=["threshold_ms"])
        )
    return alt.layer(*layers).properties(width=360, height=220, title=title)


def stack_groups_chart(
    groups: pd.DataFrame, title: str = "Ranks grouped by where they wait"
) -> alt.Chart:
    """One bar per stack group: how many ranks stand in each place.

    Args:
        groups: columns ``group, ranks, n_ranks, top`` (``group_stacks``).
    """
    check_columns(groups, ["group", "ranks", "n_ranks", "top"], "groups")
    data = pd.DataFrame(
        {
            "where": groups["top"].astype(str),
            "ranks": groups["ranks"].map(lambda rs: ", ".join(map(str, rs))),
            "n_ranks": groups["n_ranks"].astype(int),
        }
    )
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("n_ranks:Q", title="ranks", axis=alt.Axis(tickMinStep=1)),
            y=alt.Y("where:N", title="innermost function", sort="-x"),
            tooltip=["where", "ranks", "n_ranks"],
        )
        .properties(width=360, height=alt.Step(24), title=title)
    )


__all__ = ["stack_groups_chart", "step_timeline_chart", "step_times_chart"]
