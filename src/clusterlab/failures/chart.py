"""Charts of failure: what survivors see, and heartbeat failure detectors.

Builders take the DataFrames of ``cl.failures.ranks`` and ``cl.failures.sim``
and return Altair charts; the explorer carries Vega-Lite sliders, so it stays
interactive in the built book with no kernel.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Range
from clusterlab.core.units import HOUR_S

TIMEOUT_AXIS = "detector timeout (s)"


def survivor_chart(
    df: pd.DataFrame, title: str = "How long each survivor took to learn of the fault"
) -> alt.Chart:
    """Seconds from the fault to each survivor's exception, by kind of fault.

    Args:
        df: columns ``fault``, ``rank``, ``learned_s`` (from ``run_fault``).
    """
    check_columns(df, ["fault", "rank", "learned_s"])
    return (
        alt.Chart(df)
        .mark_point(filled=True, size=120)
        .encode(
            x=alt.X(
                "learned_s:Q",
                scale=alt.Scale(type="log"),
                title="seconds from the fault to the survivor's exception (log scale)",
            ),
            y=alt.Y("fault:N", title="fault"),
            yOffset="rank:N",
            color=alt.Color("rank:N", title="survivor rank"),
            tooltip=["fault", "rank", alt.Tooltip("learned_s:Q", format=".3f")],
        )
        .properties(
            title=alt.TitleParams(
                title,
                subtitle="a killed peer closes its sockets; a frozen one is "
                "found only by the timeout",
            ),
            width=440,
            height=120,
        )
    )


def _heartbeat_panels(base: alt.Chart) -> alt.HConcatChart:
    x = alt.X("timeout_s:Q", title=TIMEOUT_AXIS)
    det_model = base.mark_line(color="#000", strokeDash=[6, 3]).encode(
        x=x, y=alt.Y("model_detection_time_s:Q", title="mean detection time (s)")
    )
    det_sim = base.mark_point(color="#0072B2").encode(
        x=x,
        y="detection_time_s:Q",
        tooltip=[
            alt.Tooltip("timeout_s:Q", title="timeout s"),
            alt.Tooltip("detection_time_s:Q", title="simulated s", format=".3f"),
            alt.Tooltip("model_detection_time_s:Q", title="model s", format=".3f"),
        ],
    )
    y_fa = alt.Y(
        "model_fa_per_h:Q",
        scale=alt.Scale(type="log", domain=[1e-3, 1e4], clamp=True),
        title="false alarms per hour (log scale)",
    )
    fa_model = base.mark_line(color="#000", strokeDash=[6, 3]).encode(x=x, y=y_fa)
    fa_sim = (
        base.transform_filter("datum.fa_per_h > 0")
        .mark_point(color="#D55E00")
        .encode(
            x=x,
            y=alt.Y("fa_per_h:Q", scale=alt.Scale(type="log", domain=[1e-3, 1e4])),
            tooltip=[
                alt.Tooltip("timeout_s:Q", title="timeout s"),
                alt.Tooltip("fa_per_h:Q", title="simulated /h", format=".3g"),
                alt.Tooltip("model_fa_per_h:Q", title="model /h", format=".3g"),
            ],
        )
    )
    left = alt.layer(det_model, det_sim).properties(width=250, height=240)
    right = alt.layer(fa_model, fa_sim).properties(width=250, height=240)
    return alt.hconcat(left, right)


def _per_hour(df: pd.DataFrame) -> pd.DataFrame:
    return df.assign(
        fa_per_h=df["false_alarm_rate_per_s"] * HOUR_S,
        model_fa_per_h=df["model_false_alarm_rate_per_s"] * HOUR_S,
    )


def heartbeat_chart(
    sweep: pd.DataFrame,
    title: str = "A longer timeout: fewer false alarms, later detection",
) -> alt.HConcatChart:
    """Detection time and false alarms against the timeout (``heartbeat_sweep``)."""
    check_columns(
        sweep,
        [
            "timeout_s",
            "detection_time_s",
            "false_alarm_rate_per_s",
            "model_detection_time_s",
            "model_false_alarm_rate_per_s",
        ],
    )
    chart = _heartbeat_panels(alt.Chart(_per_hour(sweep)))
    return chart.properties(
        title=alt.TitleParams(title, subtitle="points: simulation; dashed: closed form")
    )


# Jitter and loss, on the live widget's sliders and the page's; the page's stop
# at the precomputed grid's points (Range.within).
JITTER_MS = Range(
    "jitter_ms", min=0, max=500, step=10, default=100,
    label="mean jitter (ms) ", widget_label="jitter (ms)",
)  # fmt: skip
LOSS_PCT = Range(
    "loss_pct", min=0.0, max=20.0, step=0.5, default=1.0,
    label="heartbeats lost (%) ", widget_label="loss (%)",
)  # fmt: skip


def heartbeat_explorer(
    grid: pd.DataFrame,
    title: str = "Move the sliders: jitter and loss against the timeout",
) -> alt.HConcatChart:
    """``heartbeat_chart`` over a precomputed grid, with jitter and loss sliders.

    Args:
        grid: ``heartbeat_sweep`` rows with extra integer columns ``jitter_ms``
            and ``loss_pct`` (the slider values; integers match exactly), each
            with two values or more, evenly spaced on the live sliders' grids.
    """
    check_columns(grid, ["jitter_ms", "loss_pct", "timeout_s"])
    jit = sorted(int(v) for v in grid["jitter_ms"].unique())
    loss = sorted(int(v) for v in grid["loss_pct"].unique())

    def step(values):
        gaps = {b - a for a, b in zip(values, values[1:], strict=False)}
        return min(gaps) if gaps else 1

    j = JITTER_MS.within(jit[0], jit[-1], step(jit)).param(value=jit[len(jit) // 2])
    p = LOSS_PCT.within(loss[0], loss[-1], step(loss)).param(value=loss[len(loss) // 2])
    base = alt.Chart(_per_hour(grid)).transform_filter(
        "datum.jitter_ms == jitter_ms && datum.loss_pct == loss_pct"
    )
    return (
        _heartbeat_panels(base)
        .add_params(j, p)
        .properties(
            title=alt.TitleParams(
                title, subtitle="points: simulation; dashed: closed form"
            )
        )
    )


__all__ = ["heartbeat_chart", "heartbeat_explorer", "survivor_chart"]
