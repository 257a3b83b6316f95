"""Space-time diagrams: processes, messages, a crash, clocks that disagree.

``space_time_spec`` lays out a run that the caller simulated with
``cl.clocks.logical.simulate_messages`` (one lane per process, time to the
right, a message as an arrow from its send to its receive) and stamps each
event with its local clock reading, its Lamport clock or its vector clock. It
steps with a slider, one event per step.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.diagram import ALWAYS, box_diagram, frame
from clusterlab.core.validate import check_choice

STAMPS = ("clock", "lamport", "vector")


EVENT_COLUMNS = ("event", "process", "kind", "msg", "true_s", "wall_s", "lamport")


def stamp(row, stamps: str) -> str:
    """The label of one event: its local clock in ms, Lamport or vector stamp."""
    if stamps == "clock":
        return f"{row['wall_s'] * 1e3:.1f}"
    if stamps == "lamport":
        return str(row["lamport"])
    return "".join(str(v) for v in row["vector"])


def space_time_spec(
    events: pd.DataFrame,
    stamps: str = "lamport",
    crash_process: int | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """Lanes, events and messages of a message-passing run.

    Args:
        events: a table of ``cl.clocks.logical.simulate_messages`` (the
            caller runs it: a diagram does not simulate).
        stamps: "clock" (the local clock, ms), "lamport" or "vector".
        crash_process: a process that crashes after its last event, or None.

    Returns:
        ``(nodes, links, n_steps)``: event ``i`` (in true-time order) appears at
        step ``i``; a message appears with its receive.
    """
    stamps = check_choice("stamps", stamps, STAMPS)
    check_columns(events, EVENT_COLUMNS, "events")
    ev = events.sort_values("true_s", ignore_index=True)
    n_proc = int(ev["process"].max()) + 1
    lane_h, ew, eh = 14.0, 6.0, 5.0
    gap = 88.0 / len(ev)  # events are spaced in their order, not to scale
    nodes, links = [], []
    for p in range(n_proc):
        nodes.append(
            dict(
                id=f"P{p}",
                x=0,
                y=p * lane_h + eh / 2 - 0.4,
                w=100,
                h=0.8,
                kind="process",
                label="",
            )
        )
        nodes.append(
            dict(
                id=f"name{p}",
                x=-10,
                y=p * lane_h,
                w=8,
                h=eh,
                kind="process",
                label=f"P{p}",
            )
        )
    sends = {}
    for i, r in ev.iterrows():
        x = (i + 0.5) * gap
        nid = f"e{i}"
        nodes.append(
            dict(
                id=nid,
                x=x - ew / 2,
                y=r["process"] * lane_h,
                w=ew,
                h=eh,
                t0=i,
                t1=ALWAYS,
                kind=r["kind"],
                label=stamp(r, stamps),
            )
        )
        if r["kind"] == "send":
            sends[r["msg"]] = nid
        elif r["kind"] == "recv" and r["msg"] in sends:
            links.append(
                dict(
                    src=sends[r["msg"]],
                    dst=nid,
                    t0=i,
                    t1=ALWAYS,
                    kind="message",
                    label=f"m{r['msg']}",
                    straight=True,
                )
            )
    n_steps = len(ev)
    if crash_process is not None:
        x = len(ev) * gap
        nodes.append(
            dict(
                id="crash",
                x=x,
                y=crash_process * lane_h - 1,
                w=14,
                h=eh + 2,
                t0=n_steps,
                t1=ALWAYS,
                kind="crash",
                label="✕ crash",
            )
        )
        n_steps += 1
    nodes = frame(nodes, ())
    nodes["x"] = nodes["x"] + 10  # room for the process names
    return nodes, frame(links, ()), n_steps


def space_time_diagram(
    events: pd.DataFrame,
    stamps: str = "lamport",
    crash_process: int | None = None,
) -> alt.LayerChart:
    """The space-time diagram of :func:`space_time_spec`, stepped by a slider."""
    nodes, links, n_steps = space_time_spec(events, stamps, crash_process)
    what = {
        "clock": "each event stamped with its own clock (ms): the clocks disagree",
        "lamport": "each event stamped with its Lamport clock",
        "vector": "each event stamped with its vector clock (P0 P1 P2)",
    }[stamps]
    return box_diagram(
        nodes,
        links,
        title="Processes, messages and time",
        subtitle=f"events in the order they happen, left to right; {what}",
        size=(580, 190),
        n_steps=n_steps,
        step_name="event",
        legend=True,
    )


__all__ = ["STAMPS", "space_time_diagram", "space_time_spec"]
