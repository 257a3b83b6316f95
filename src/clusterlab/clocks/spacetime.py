"""The space-time diagram: processes as lanes, messages as arrows, clocks on events.

``spacetime_chart`` draws ``cl.clocks.logical.simulate_messages``'s events
with their Lamport and vector clocks. On the wall-clock axis a message received
"before" it was sent is drawn in orange: there the timestamps lie.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Choice


def _messages(events: pd.DataFrame, span, n: int, width: int, height: int):
    sends = events[events["kind"] == "send"]
    recvs = events[events["kind"] == "recv"]
    m = sends.merge(recvs, on="msg", suffixes=("_s", "_r"))
    out = pd.DataFrame({"msg": m["msg"], "lane_s": m["process_s"]})
    out["lane_r"] = m["process_r"]
    for clock in ("true", "wall"):
        xs, xr = m[f"{clock}_s_s"] * 1e3, m[f"{clock}_s_r"] * 1e3
        out[f"{clock}_xs"], out[f"{clock}_xr"] = xs, xr
        # Arrowheads point along the arrow as drawn, in pixels (y grows down).
        dx = (xr - xs) / span * width
        dy = (out["lane_r"] - out["lane_s"]) / n * height
        out[f"{clock}_angle"] = np.degrees(np.arctan2(dy, dx))
    out["backwards"] = out["wall_xr"] < out["wall_xs"]
    return out


def spacetime_chart(
    events: pd.DataFrame,
    *,
    width: int = 610,
    lane_px: int = 90,
    title: str = "A space-time diagram: processes as lanes, messages as arrows",
) -> alt.LayerChart:
    """Events on process lanes, messages as arrows, each event labelled with clocks.

    Above each event is its Lamport time, below it its vector time. A radio
    button switches the time axis between true time and each process's own
    wall clock; with the wall clocks a message can point backwards in time
    (drawn in vermillion), although Lamport and vector times still increase
    along it.

    Args:
        events: ``simulate_messages``'s DataFrame.
        width: plot width in pixels (used to angle the arrowheads).
        lane_px: height of each process's lane, in pixels.
    """
    check_columns(
        events, ["event", "process", "kind", "msg", "true_s", "wall_s", "lamport"]
    )
    n = int(events["process"].max()) + 1
    height = lane_px * n
    ev = events.assign(
        true_x=events["true_s"] * 1e3,
        wall_x=events["wall_s"] * 1e3,
        vec="[" + events["vector"].map(lambda v: ",".join(map(str, v))) + "]",
        lam="L" + events["lamport"].astype(str),
    )[["event", "process", "kind", "true_x", "wall_x", "vec", "lam"]]
    lo = float(min(ev["true_x"].min(), ev["wall_x"].min()))
    hi = float(max(ev["true_x"].max(), ev["wall_x"].max()))
    pad = 0.04 * (hi - lo or 1.0)
    lo, hi = lo - pad, hi + pad
    msgs = _messages(events, hi - lo, n, width, height)
    mode = Choice(
        "time_axis", options=("true", "wall"), default="true",
        labels=("true time", "each process's own clock"), label="time axis ",
    ).param()  # fmt: skip
    x_scale = alt.Scale(domain=[lo, hi], nice=False, zero=False)
    y_scale = alt.Scale(domain=[-0.5, n - 0.5], reverse=True, zero=False)
    x_title = "time (ms): true time, or each process's wall clock"
    y_axis = alt.Axis(values=list(range(n)), labelExpr="'P' + datum.value", grid=False)
    lanes = (
        alt.Chart(pd.DataFrame({"lane": range(n)}))
        .mark_rule(color="#999")
        .encode(y=alt.Y("lane:Q", scale=y_scale, axis=y_axis, title="process"))
    )
    pick_x = "time_axis == 'true' ? datum.true_{0} : datum.wall_{0}"
    base_m = alt.Chart(msgs).transform_calculate(
        xs=pick_x.format("xs"),
        xr=pick_x.format("xr"),
        angle=pick_x.format("angle"),
        back="time_axis == 'wall' && datum.backwards",
    )
    color = alt.condition("datum.back", alt.value("#D55E00"), alt.value("#0072B2"))
    arrows = base_m.mark_rule(strokeWidth=1.8).encode(
        x=alt.X("xs:Q", scale=x_scale, title=x_title),
        x2="xr:Q",
        y=alt.Y("lane_s:Q", scale=y_scale),
        y2="lane_r:Q",
        color=color,
    )
    # The head sits 80% of the way along, clear of the receive event's dot.
    heads = (
        base_m.transform_calculate(
            hx="datum.xs + 0.8 * (datum.xr - datum.xs)",
            hy="datum.lane_s + 0.8 * (datum.lane_r - datum.lane_s)",
        )
        .mark_point(shape="triangle-right", size=110, filled=True, opacity=1)
        .encode(
            x=alt.X("hx:Q", scale=x_scale),
            y=alt.Y("hy:Q", scale=y_scale),
            angle=alt.Angle("angle:Q", scale=None),
            color=color,
        )
    )
    base_e = alt.Chart(ev).transform_calculate(x=pick_x.format("x"))
    x_enc = alt.X("x:Q", scale=x_scale)
    y_enc = alt.Y("process:Q", scale=y_scale)
    dots = base_e.mark_point(size=55, filled=True, color="#000").encode(
        x=x_enc,
        y=y_enc,
        tooltip=["event", "kind", "lam", "vec", alt.Tooltip("x:Q", format=".2f")],
    )
    above = base_e.mark_text(dy=-12, fontSize=11).encode(x=x_enc, y=y_enc, text="lam")
    below = base_e.mark_text(dy=13, fontSize=10, color="#444").encode(
        x=x_enc, y=y_enc, text="vec"
    )
    return (
        alt.layer(lanes, arrows, heads, dots, above, below)
        .add_params(mode)
        .properties(
            width=width,
            height=height,
            title=alt.TitleParams(
                title,
                subtitle=[
                    "above each event its Lamport time, below it its vector time;",
                    "vermillion: a message received before it was sent, by the wall "
                    "clocks",
                ],
            ),
        )
    )


__all__ = ["spacetime_chart"]
