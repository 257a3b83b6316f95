"""A heartbeat failure detector as a picture, with a false suspicion.

The run it draws comes from the caller (``cl.failures.sim.detector_example``).
"""

import altair as alt
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.diagram import box_diagram, frame


def failure_detector_spec(
    events: pd.DataFrame,
) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """Heartbeats from a worker, their arrivals, and the monitor's verdicts.

    Args:
        events: a run of ``cl.failures.sim.simulate`` (the book's example:
            ``cl.failures.sim.detector_example()``).

    Returns:
        ``(nodes, links, n_steps)``: one step per second of the run.
    """
    check_columns(events, ["time_s", "event"], "events")
    ev = events
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


def failure_detector_diagram(events: pd.DataFrame) -> alt.LayerChart:
    """The timeline of :func:`failure_detector_spec`, one slider step per second."""
    nodes, links, n_steps = failure_detector_spec(events)
    timeout_s = events.attrs.get("timeout_s", 2.0)
    return box_diagram(
        nodes,
        links,
        title="A heartbeat failure detector",
        subtitle=(
            f"the monitor suspects after {timeout_s:g} s of silence: two lost "
            "heartbeats look the same as a crash"
        ),
        size=(600, 170),
        n_steps=n_steps,
        step_name="second",
        legend=True,
    )


__all__ = ["failure_detector_diagram", "failure_detector_spec"]
