"""Charts of physical time: clock error and skew over time.

``clock_error_chart`` and ``skew_chart`` draw ``cl.clocks.sim.simulate``'s
output; ``skew_explorer_chart`` draws a precomputed sweep with sliders and a
radio button that work in the static book.
"""

from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Choice, Range

SKEW_FLOOR_S = 1e-9  # a log axis cannot show zero; skews below 1 ns sit on it


# Seconds in SI prefixes on log axes: 1ns, 10µs, 17ms rather than 1e-9, 0.00001.
_SECONDS_AXIS = alt.Axis(
    values=[10.0**k for k in range(-9, 2)],
    labelExpr="format(datum.value, '~s') + 's'",
)


_PROTOCOL_LABELS = {"none": "none", "ntp": "NTP-like", "ptp": "PTP-like"}


_PROTOCOL_COLORS = {"none": "#D55E00", "ntp": "#0072B2", "ptp": "#009E73"}


# The skew explorer's drift and sync interval. Both move on a log scale: the
# page's slider holds the exponent (log10 ppm, log2 s) and the live widget is a
# FloatLogSlider of the value itself (ppm, s). The page's slider stops at the
# sweep's points (Range.within), each one a value the live slider reaches.
LOG10_DRIFT = Range(
    "log_drift", min=0.0, max=2.0, step=0.25, default=1.0, log_base=10,
    label="log10 of the largest drift (ppm) ", widget_label="largest drift (ppm)",
)  # fmt: skip
# The protocol brought forward: the live widget's buttons and the page's radio.
# Its options are cl.clocks.sim.PROTOCOLS (a chart may not import a simulation;
# tests/unit/test_control_twins.py holds the two equal).
PROTOCOL = Choice(
    "protocol", options=tuple(_PROTOCOL_COLORS), default="ntp",
    label="protocol ", widget_kind="toggle",
)  # fmt: skip
LOG2_INTERVAL = Range(
    "log_interval", min=0, max=8, step=1, default=4, log_base=2,
    label="log2 of the sync interval (s) ", widget_label="sync interval (s)",
)  # fmt: skip


def _sig(values, digits: int = 3):
    """Floats to ``digits`` significant digits: a chart's spec carries each one."""
    return [float(f"{v:.{digits}g}") for v in values]


def _thin(df: pd.DataFrame, by: str, max_points: int) -> pd.DataFrame:
    """Every k-th row of each ``by`` group, so that no group has more than
    ``max_points`` rows (for straight or slowly bending lines)."""
    n = int(df.groupby(by).size().max()) if len(df) else 0
    k = max(1, -(-n // max_points))
    return df[df.groupby(by).cumcount() % k == 0]


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
    df: pd.DataFrame,
    title: str = "Each node's clock error over time",
    *,
    max_points: int = 120,
) -> alt.Chart:
    """Every node's error (local minus true time, ms) against time (minutes).

    At most ``max_points`` samples per node are drawn (every k-th), rounded to
    four significant digits, which keeps the chart's spec small.
    """
    check_columns(df, ["time_s", "node", "error_s", "drift_ppm"])
    df = _thin(df, "node", max_points)
    data = pd.DataFrame(
        {
            "node": df["node"].astype(str),
            "drift_ppm": _sig(df["drift_ppm"], 4),
            "time_min": _sig(df["time_s"] / 60, 4),
            "error_ms": _sig(df["error_s"] * 1e3, 4),
        }
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
    max_points: int = 100,
) -> alt.LayerChart:
    """Skew (largest minus smallest error, log scale) over time, by protocol.

    At most ``max_points`` samples per protocol are drawn (every k-th).
    """
    check_columns(skew_df, ["time_s", "skew_s", "protocol"])
    # Clocks set equal at the start have no skew, which a log axis cannot show.
    data = _thin(skew_df[skew_df["skew_s"] > 0], "protocol", max_points)
    # Only the columns drawn, rounded: the spec carries (and validates) every value.
    data = pd.DataFrame(
        {
            "protocol": data["protocol"],
            "time_min": _sig(data["time_s"] / 60, 4),
            "skew_s": _sig(data["skew_s"]),
        }
    )
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
    check_columns(
        sweep, ["max_drift_ppm", "sync_interval_s", "protocol", "time_s", "skew_s"]
    )
    drifts = np.log10(sorted(sweep["max_drift_ppm"].unique()))
    intervals = np.log2(sorted(sweep["sync_interval_s"].unique()))
    protocols = [p for p in _PROTOCOL_COLORS if p in set(sweep["protocol"])]
    # One row per setting and time, one column per protocol (folded back in
    # the chart): a third of the values a long table would repeat.
    data = (
        sweep.assign(
            ld=np.round(np.log10(sweep["max_drift_ppm"]), 3),
            li=np.round(np.log2(sweep["sync_interval_s"]), 3),
            t=_sig(sweep["time_s"] / 60),
            skew_s=_sig(sweep["skew_s"].clip(lower=SKEW_FLOOR_S)),
        )
        .pivot_table(index=["ld", "li", "t"], columns="protocol", values="skew_s")
        .reset_index()[["ld", "li", "t", *protocols]]
    )
    d_step = float(np.min(np.diff(drifts))) if len(drifts) > 1 else 1.0
    i_step = float(np.min(np.diff(intervals))) if len(intervals) > 1 else 1.0
    ld = LOG10_DRIFT.within(
        float(drifts.min()), float(drifts.max()), round(d_step, 3)
    ).param(value=float(drifts[np.argmin(abs(drifts - math.log10(drift_ppm)))]))
    li = LOG2_INTERVAL.within(
        float(intervals.min()), float(intervals.max()), round(i_step, 3)
    ).param(
        value=float(intervals[np.argmin(abs(intervals - math.log2(sync_interval_s)))])
    )
    pick = alt.selection_point(
        name=PROTOCOL.name,
        fields=["protocol"],
        value=protocol,
        bind=PROTOCOL.among(protocols).binding(),
    )
    lines = (
        alt.Chart(data)
        .transform_filter(
            "abs(datum.ld - log_drift) < 0.01 && abs(datum.li - log_interval) < 0.01"
        )
        .transform_fold(protocols, as_=["protocol", "skew_s"])
        .mark_line()
        .encode(
            x=alt.X("t:Q", title="true time (minutes)"),
            y=alt.Y(
                "skew_s:Q",
                scale=alt.Scale(type="log", domain=[SKEW_FLOOR_S, 10], clamp=True),
                axis=_SECONDS_AXIS,
                title="largest skew in each window (s, log scale)",
            ),
            color=_protocol_color(protocols),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.2)),
            tooltip=[
                alt.Tooltip("protocol:N"),
                alt.Tooltip("t:Q", title="minutes", format=".1f"),
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
                subtitle="precomputed with cl.clocks.sim; dashed: "
                f"{threshold_s * 1e3:g} ms, the skew in claim P2",
            )
        )
    )


__all__ = ["clock_error_chart", "skew_chart", "skew_explorer_chart"]
