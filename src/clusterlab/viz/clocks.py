"""Charts of time: clock error and skew over time, and a space-time diagram.

``clock_error_chart`` and ``skew_chart`` draw ``cl.sim.clocks.simulate``'s
output; ``skew_explorer_chart`` draws a precomputed sweep with sliders and a
radio button that work in the static book; ``spacetime_chart`` draws
``cl.sim.logical_clocks.simulate_messages``'s events as lanes and arrows.
"""

from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

__all__ = [
    "clock_error_chart",
    "skew_chart",
    "skew_explorer_chart",
    "spacetime_chart",
]

SKEW_FLOOR_S = 1e-9  # a log axis cannot show zero; skews below 1 ns sit on it
# Seconds in SI prefixes on log axes: 1ns, 10µs, 17ms rather than 1e-9, 0.00001.
_SECONDS_AXIS = alt.Axis(
    values=[10.0**k for k in range(-9, 2)],
    labelExpr="format(datum.value, '~s') + 's'",
)
_PROTOCOL_LABELS = {"none": "none", "ntp": "NTP-like", "ptp": "PTP-like"}
_PROTOCOL_COLORS = {"none": "#D55E00", "ntp": "#0072B2", "ptp": "#009E73"}


def _check_columns(df, needed) -> None:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"df must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise ValueError(f"df lacks the column(s) {missing}; it has {list(df.columns)}")


def _protocol_color(protocols) -> alt.Color:
    present = [p for p in _PROTOCOL_COLORS if p in set(protocols)]
    return alt.Color(
        "protocol:N",
        title="sync protocol",
        scale=alt.Scale(domain=present, range=[_PROTOCOL_COLORS[p] for p in present]),
        legend=alt.Legend(labelExpr=_label_expr()),
    )


def _label_expr() -> str:
    cases = " : ".join(
        f"datum.label == '{k}' ? '{v}'" for k, v in _PROTOCOL_LABELS.items()
    )
    return f"{cases} : datum.label"


def _threshold_rule(threshold_s: float):
    rule = pd.DataFrame(
        {"skew_s": [threshold_s], "label": [f"{threshold_s * 1e3:g} ms"]}
    )
    base = alt.Chart(rule)
    # Typed channel objects: Altair builds them without searching its schema.
    line = base.mark_rule(strokeDash=[4, 4], color="#000").encode(y=alt.Y("skew_s:Q"))
    text = base.mark_text(align="left", dx=4, dy=-7, color="#000").encode(
        y=alt.Y("skew_s:Q"), x=alt.XValue(0), text=alt.Text("label:N")
    )
    return line + text


def clock_error_chart(
    df: pd.DataFrame, title: str = "Each node's clock error over time"
) -> alt.Chart:
    """Every node's error (local minus true time, ms) against time (minutes)."""
    _check_columns(df, ["time_s", "node", "error_s", "drift_ppm"])
    data = df.assign(
        time_min=df["time_s"] / 60,
        error_ms=df["error_s"] * 1e3,
        node=df["node"].astype(str),
    )
    return (
        alt.Chart(data)
        .mark_line()
        .encode(
            x=alt.X("time_min:Q", title="true time (minutes)"),
            y=alt.Y("error_ms:Q", title="clock error: local − true time (ms)"),
            color=alt.Color("node:N", title="node"),
            tooltip=[
                "node",
                alt.Tooltip("drift_ppm:Q", title="drift (ppm)", format=".1f"),
                alt.Tooltip("time_min:Q", title="minutes", format=".1f"),
                alt.Tooltip("error_ms:Q", title="error (ms)", format=".3f"),
            ],
        )
        .properties(
            title=alt.TitleParams(
                title, subtitle="a clock that runs r ppm fast gains r µs per second"
            )
        )
    )


def skew_chart(
    skew_df: pd.DataFrame,
    *,
    threshold_s: float = 17e-3,
    title: str = "Skew between the nodes' clocks",
) -> alt.LayerChart:
    """Skew (largest minus smallest error, log scale) over time, by protocol."""
    _check_columns(skew_df, ["time_s", "skew_s", "protocol"])
    # Clocks set equal at the start have no skew, which a log axis cannot show.
    data = skew_df[skew_df["skew_s"] > 0]
    # Only the columns drawn: the spec carries (and validates) every value.
    data = data.assign(time_min=data["time_s"] / 60)[["protocol", "time_min", "skew_s"]]
    lines = (
        alt.Chart(data)
        .mark_line()
        .encode(
            x=alt.X("time_min:Q", title="true time (minutes)"),
            y=alt.Y(
                "skew_s:Q",
                scale=alt.Scale(type="log"),
                axis=_SECONDS_AXIS,
                title="skew between nodes (s, log scale)",
            ),
            color=_protocol_color(data["protocol"]),
            tooltip=[
                "protocol",
                alt.Tooltip("time_min:Q", title="minutes", format=".1f"),
                alt.Tooltip("skew_s:Q", title="skew (s)", format=".2e"),
            ],
        )
    )
    return alt.layer(lines, _threshold_rule(threshold_s)).properties(
        title=alt.TitleParams(
            title, subtitle=f"dashed: {threshold_s * 1e3:g} ms, the skew in claim P2"
        )
    )


def skew_explorer_chart(
    sweep: pd.DataFrame,
    *,
    threshold_s: float = 17e-3,
    drift_ppm: float = 10.0,
    sync_interval_s: float = 16.0,
    protocol: str = "ntp",
    title: str = "Move the sliders: how far apart do the clocks get?",
) -> alt.LayerChart:
    """``skew_sweep``'s output with sliders for drift and interval, a protocol radio.

    The sliders step through the sweep's values on a log scale (log10 of the
    drift, log2 of the interval); they are Vega-Lite parameters, so they work
    in the static book with no kernel. The radio button brings one protocol
    forward.
    """
    _check_columns(
        sweep, ["max_drift_ppm", "sync_interval_s", "protocol", "time_s", "skew_s"]
    )
    drifts = np.log10(sorted(sweep["max_drift_ppm"].unique()))
    intervals = np.log2(sorted(sweep["sync_interval_s"].unique()))
    data = sweep.assign(
        ld=np.round(np.log10(sweep["max_drift_ppm"]), 3),
        li=np.round(np.log2(sweep["sync_interval_s"]), 3),
        time_min=sweep["time_s"] / 60,
        skew_s=sweep["skew_s"].clip(lower=SKEW_FLOOR_S),
    )[["ld", "li", "protocol", "time_min", "skew_s"]]
    d_step = float(np.min(np.diff(drifts))) if len(drifts) > 1 else 1.0
    i_step = float(np.min(np.diff(intervals))) if len(intervals) > 1 else 1.0
    ld = alt.param(
        name="log_drift",
        value=float(drifts[np.argmin(abs(drifts - math.log10(drift_ppm)))]),
        bind=alt.binding_range(
            min=float(drifts.min()),
            max=float(drifts.max()),
            step=round(d_step, 3),
            name="log10 of the largest drift (ppm) ",
        ),
    )
    li = alt.param(
        name="log_interval",
        value=float(intervals[np.argmin(abs(intervals - math.log2(sync_interval_s)))]),
        bind=alt.binding_range(
            min=float(intervals.min()),
            max=float(intervals.max()),
            step=round(i_step, 3),
            name="log2 of the sync interval (s) ",
        ),
    )
    protocols = [p for p in _PROTOCOL_COLORS if p in set(sweep["protocol"])]
    pick = alt.selection_point(
        fields=["protocol"],
        value=protocol,
        bind=alt.binding_radio(options=protocols, name="protocol "),
    )
    lines = (
        alt.Chart(data)
        .transform_filter(
            "abs(datum.ld - log_drift) < 0.01 && abs(datum.li - log_interval) < 0.01"
        )
        .mark_line()
        .encode(
            x=alt.X("time_min:Q", title="true time (minutes)"),
            y=alt.Y(
                "skew_s:Q",
                scale=alt.Scale(type="log", domain=[SKEW_FLOOR_S, 10], clamp=True),
                axis=_SECONDS_AXIS,
                title="largest skew in each window (s, log scale)",
            ),
            color=_protocol_color(protocols),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.2)),
            tooltip=[
                "protocol",
                alt.Tooltip("time_min:Q", title="minutes", format=".1f"),
                alt.Tooltip("skew_s:Q", title="skew (s)", format=".2e"),
            ],
        )
        .add_params(pick)
    )
    label = (
        alt.Chart(pd.DataFrame({"x": [0]}))
        .transform_calculate(
            text="'drift up to ±' + format(pow(10, log_drift), '.3~g') + "
            "' ppm, sync every ' + format(pow(2, log_interval), '.3~g') + ' s'"
        )
        .mark_text(align="left", baseline="top", dx=4, dy=4, fontSize=12)
        .encode(x=alt.XValue(0), y=alt.YValue(0), text=alt.Text("text:N"))
    )
    return (
        alt.layer(lines, _threshold_rule(threshold_s), label)
        .add_params(ld, li)
        .properties(
            title=alt.TitleParams(
                title,
                subtitle="precomputed with cl.sim.clocks; dashed: "
                f"{threshold_s * 1e3:g} ms, the skew in claim P2",
            )
        )
    )


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
    width: int = 640,
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
    _check_columns(
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
    mode = alt.param(
        name="time_axis",
        value="true",
        bind=alt.binding_radio(
            options=["true", "wall"],
            labels=["true time", "each process's own clock"],
            name="time axis ",
        ),
    )
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
                subtitle="above each event its Lamport time, below it its vector "
                "time; vermillion: a message received before it was sent, "
                "by the wall clocks",
            ),
        )
    )
