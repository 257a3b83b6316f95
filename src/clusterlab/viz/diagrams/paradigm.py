"""Space-time diagrams: processes, messages, a crash, clocks that disagree.

``space_time_spec`` lays out a run of ``cl.sim.logical_clocks`` (one lane per
process, time to the right, a message as an arrow from its send to its
receive) and stamps each event with its local clock reading, its Lamport
clock or its vector clock. ``failure_detector_spec`` lays out a run of
``cl.sim.failures``: heartbeats, their arrivals, the monitor's suspicions, and
the crash. Both step with a slider: one event per step, or one second.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from ..._validate import check_choice
from ...sim import failures, logical_clocks
from .._checks import check_columns
from ._base import ALWAYS, box_diagram, frame

__all__ = [
    "STAMPS",
    "failure_detector_diagram",
    "failure_detector_spec",
    "space_time_diagram",
    "space_time_spec",
]

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
    events: pd.DataFrame | None = None,
    stamps: str = "lamport",
    crash_process: int | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """Lanes, events and messages of a message-passing run.

    Args:
        events: a table of ``cl.sim.logical_clocks.simulate_messages`` (None:
            its default run, 3 processes).
        stamps: "clock" (the local clock, ms), "lamport" or "vector".
        crash_process: a process that crashes after its last event, or None.

    Returns:
        ``(nodes, links, n_steps)``: event ``i`` (in true-time order) appears at
        step ``i``; a message appears with its receive.
    """
    stamps = check_choice("stamps", stamps, STAMPS)
    if events is None:
        events = logical_clocks.simulate_messages(logical_clocks.LogicalParams())
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
    events: pd.DataFrame | None = None,
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
        size=(600, 190),
        n_steps=n_steps,
        step_name="event",
        legend=True,
    )


def failure_detector_spec(
    params: failures.HeartbeatParams | None = None, seed: int = 1
) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """Heartbeats from a worker, their arrivals, and the monitor's verdicts.

    Args:
        params: the detector (None: 1 s heartbeats, 2 s timeout, 20% loss, a
            crash at 12 s).
        seed: the simulation's seed.

    Returns:
        ``(nodes, links, n_steps)``: one step per second of the run.
    """
    p = params or failures.HeartbeatParams(
        interval_s=1.0,
        base_delay_s=0.05,
        jitter_s=0.3,
        loss=0.2,
        timeout_s=2.0,
        crash_s=12.0,
    )
    ev = failures.simulate(p, seed)
    t_end = float(ev["time_s"].max()) + 1.0
    scale = 100.0 / t_end
    nodes = [
        dict(id="worker", x=0, y=0, w=100, h=0.8, kind="lane", label=""),
        dict(id="monitor", x=0, y=20, w=100, h=0.8, kind="lane", label=""),
    ]
    links = []
    sent = {}
    suspected_at = None
    for i, r in ev.iterrows():
        x, step = r["time_s"] * scale, int(r["time_s"])
        if r["event"] in ("sent", "lost"):
            if r["event"] == "sent":
                sent[r["heartbeat"]] = i
                nodes.append(
                    dict(
                        id=f"h{i}",
                        x=x - 1,
                        y=-1.5,
                        w=2,
                        h=3.8,
                        t0=step,
                        kind="heartbeat",
                        label="",
                    )
                )
            else:
                nodes.append(
                    dict(
                        id=f"l{i}",
                        x=x - 1,
                        y=8,
                        w=4,
                        h=3,
                        t0=step,
                        kind="lost",
                        label="✕",
                    )
                )
                links.append(
                    dict(
                        src=f"h{sent[r['heartbeat']]}",
                        dst=f"l{i}",
                        t0=step,
                        kind="lost",
                        label="",
                        arrow=False,
                    )
                )
        elif r["event"] == "arrived":
            nodes.append(
                dict(
                    id=f"a{i}",
                    x=x - 1,
                    y=18.5,
                    w=2,
                    h=3.8,
                    t0=step,
                    kind="arrival",
                    label="",
                )
            )
            links.append(
                dict(
                    src=f"h{sent[r['heartbeat']]}",
                    dst=f"a{i}",
                    t0=step,
                    kind="heartbeat",
                    label="",
                    straight=True,
                )
            )
        elif r["event"] == "crash":
            nodes.append(
                dict(
                    id="crash",
                    x=x - 1,
                    y=-4,
                    w=10,
                    h=6,
                    t0=step,
                    kind="crash",
                    label="✕ crash",
                )
            )
        elif r["event"] == "suspect":
            suspected_at = (x, step, bool(r["alive"]))
        elif r["event"] == "trust" and suspected_at is not None:
            x0, s0, _ = suspected_at
            nodes.append(
                dict(
                    id=f"s{i}",
                    x=x0,
                    y=24,
                    w=max(x - x0, 6),
                    h=6,
                    t0=s0,
                    kind="false suspicion",
                    label="false suspicion",
                )
            )
            suspected_at = None
    if suspected_at is not None:
        x0, s0, alive = suspected_at
        nodes.append(
            dict(
                id="suspect",
                x=x0,
                y=24,
                w=max(100 - x0, 6),
                h=6,
                t0=s0,
                kind="suspected",
                label="suspected",
            )
        )
    names = [
        dict(id="wname", x=-14, y=-2, w=12, h=5, kind="lane", label="worker"),
        dict(id="mname", x=-14, y=18, w=12, h=5, kind="lane", label="monitor"),
    ]
    nodes = frame(names + nodes, ())
    nodes["x"] = nodes["x"] + 14
    nodes["y"] = nodes["y"] + 4
    return nodes, frame(links, ()), int(t_end) + 1


def failure_detector_diagram(
    params: failures.HeartbeatParams | None = None, seed: int = 1
) -> alt.LayerChart:
    """The timeline of :func:`failure_detector_spec`, one slider step per second."""
    nodes, links, n_steps = failure_detector_spec(params, seed)
    p = params or failures.HeartbeatParams(timeout_s=2.0)
    return box_diagram(
        nodes,
        links,
        title="A heartbeat failure detector",
        subtitle=(
            f"the monitor suspects after {p.timeout_s:g} s of silence: two lost "
            "heartbeats look the same as a crash"
        ),
        size=(600, 170),
        n_steps=n_steps,
        step_name="second",
        legend=True,
    )
