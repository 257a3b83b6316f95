"""Charts of the control plane: schedules as Gantt bars, elections, write latency.

Builders take the DataFrames of ``cl.control_plane.sim`` and
``cl.control_plane.raft_experiments`` and return Altair charts.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from clusterlab.core.chart_checks import check_columns


def schedule_chart(
    table: pd.DataFrame, *, title: str = "Which job ran when, under each policy"
) -> alt.FacetChart:
    """Gantt bars: one per job, from start to end, one row of panels per policy.

    A deadlocked job is drawn as a hatched-grey bar from its arrival to the end
    of the run, labelled "deadlocked". Colour: how many leaf switches the job
    spans.

    Args:
        table: ``cl.control_plane.sim.simulate`` rows, several policies stacked
            (``job, policy, placement, n_gpus, arrival_s, start_s, end_s,
            switches, deadlocked``).
    """
    need = ["job", "policy", "placement", "n_gpus", "arrival_s", "start_s"]
    check_columns(table, [*need, "end_s", "switches", "deadlocked"], "table")
    t = table.copy()
    horizon = float(np.nanmax([t["end_s"].max(), t["arrival_s"].max(), 1.0]))
    dead = t["deadlocked"]
    t.loc[dead, "start_s"] = t.loc[dead, "arrival_s"]
    t.loc[dead, "end_s"] = horizon
    t["state"] = np.where(dead, "deadlocked", "ran")
    t["spans"] = np.where(dead, "never ran", t["switches"].astype(str) + " switch(es)")
    t["run"] = t["policy"] + ", " + t["placement"]
    cols = ["job", "run", "n_gpus", "arrival_s", "start_s", "end_s", "state", "spans"]
    bars = (
        alt.Chart(t[cols])
        .mark_bar(height=12)
        .encode(
            x=alt.X("start_s:Q", title="time (s)"),
            x2="end_s:Q",
            y=alt.Y("job:N", sort=None, title=None),
            color=alt.Color("spans:N", title="GPUs span"),
            opacity=alt.condition(
                alt.datum.state == "deadlocked", alt.value(0.35), alt.value(1.0)
            ),
            tooltip=[
                "job:N",
                "n_gpus:Q",
                alt.Tooltip("arrival_s:Q", format=".1f"),
                alt.Tooltip("start_s:Q", format=".1f"),
                alt.Tooltip("end_s:Q", format=".1f"),
                "state:N",
                "spans:N",
            ],
        )
        .properties(width=420, height=alt.Step(14))
    )
    return bars.facet(row=alt.Row("run:N", title=None), title=title).resolve_scale(
        y="independent"
    )


def election_chart(rounds: pd.DataFrame, *, title: str | None = None):
    """Time to a new leader after each kill, against the election timeout range.

    Args:
        rounds: ``leader_kills`` rounds (``round, election_s, min_timeout_s,
            max_timeout_s``).
    """
    check_columns(rounds, ["round", "election_s", "min_timeout_s", "max_timeout_s"])
    lo, hi = (
        float(rounds["min_timeout_s"].iloc[0]),
        float(rounds["max_timeout_s"].iloc[0]),
    )
    band = pd.DataFrame({"lo": [lo], "hi": [hi], "what": ["election timeout range"]})
    shade = (
        alt.Chart(band)
        .mark_rect(opacity=0.2, color="#0072B2")
        .encode(y="lo:Q", y2="hi:Q", tooltip=["what:N", "lo:Q", "hi:Q"])
    )
    points = (
        alt.Chart(rounds[["round", "election_s"]])
        .mark_point(filled=True, size=80, color="#D55E00")
        .encode(
            x=alt.X("round:O", title="leader kill"),
            y=alt.Y("election_s:Q", title="kill to new leader (s)"),
            tooltip=["round:O", alt.Tooltip("election_s:Q", format=".3f")],
        )
    )
    title = title or "Time to a new leader: at least the timeout, rarely two"
    return (shade + points).properties(width=360, height=220, title=title)


def write_latency_chart(latency: pd.DataFrame, *, title: str | None = None):
    """Each committed write's latency (ms), sending at once against batching.

    Args:
        latency: ``write_latency`` rows of both kinds stacked (``batch, i,
            latency_s``).
    """
    check_columns(latency, ["batch", "i", "latency_s"], "latency")
    t = latency[["batch", "i", "latency_s"]].copy()
    t["latency_ms"] = 1e3 * t.pop("latency_s")
    t["leader sends"] = np.where(t.pop("batch"), "with the heartbeat", "at once")
    return (
        alt.Chart(t)
        .mark_line(point=True)
        .encode(
            x=alt.X("i:Q", title="write"),
            y=alt.Y("latency_ms:Q", title="write to commit (ms)"),
            color=alt.Color("leader sends:N"),
            tooltip=["i:Q", alt.Tooltip("latency_ms:Q", format=".2f")],
        )
        .properties(
            width=360,
            height=220,
            title=title or "A committed write waits for a majority",
        )
    )


def register_chart(history: dict, *, title: str | None = None) -> alt.LayerChart:
    """Every client operation as a bar from invocation to answer, the cut shaded.

    Args:
        history: what ``cl.control_plane.register`` returns (``records,
            leader, start_s, cut_s, healed_s``).
    """
    recs = pd.DataFrame(history["records"])
    check_columns(recs, ["process", "kind", "invoke_s", "complete_s", "outcome"])
    t0, leader = history["start_s"], int(history["leader"])
    # a few hundred operations: keep only what the bars need (the chart stays
    # well under the book's 50 KB a chart)
    data = pd.DataFrame(
        {
            "t0": (recs.invoke_s - t0).round(3),
            "t1": (recs.complete_s - t0).round(3),
            "p": recs.process.astype(int),
            "o": recs.outcome,
        }
    )
    cut = pd.DataFrame(
        {"t0": [history["cut_s"] - t0], "t1": [history["healed_s"] - t0]}
    )
    shade = (
        alt.Chart(cut)
        .mark_rect(color="#dddddd")
        .encode(x=alt.X("t0:Q", title="seconds"), x2="t1:Q")
    )
    colors = alt.Scale(
        domain=["ok", "unknown", "failed"], range=["#1f5fa8", "#b86200", "#b2182b"]
    )
    label = (
        f"datum.value == {leader} ? 'client ' + datum.value + ' (beside the leader)'"
        " : 'client ' + datum.value"
    )
    bars = (
        alt.Chart(data)
        .mark_bar(height=10)
        .encode(
            x="t0:Q",
            x2="t1:Q",
            y=alt.Y("p:O", title=None, axis=alt.Axis(labelExpr=label)),
            color=alt.Color("o:N", scale=colors, title="answer"),
            tooltip=[
                alt.Tooltip("p:O", title="client"),
                alt.Tooltip("o:N", title="answer"),
            ],
        )
    )
    return alt.layer(shade, bars).properties(
        width=500,
        title=alt.TitleParams(
            title or "What the clients saw while the leader was cut off",
            subtitle=[
                "grey: the leader cut off; a bar per write or read, sent to answered",
                "(red: refused or timed out; orange: a write never confirmed)",
            ],
        ),
    )


__all__ = ["election_chart", "register_chart", "schedule_chart", "write_latency_chart"]
