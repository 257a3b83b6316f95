"""Charts of pipeline schedules: who computes when, and how much time is idle.

Every builder takes the table of ``cl.models.pipeline.simulate_schedule``
(``stage, chunk, microbatch, phase, start, end``), simulated or measured (see
``cl.pipeline.ranks.pipeline_timeline``), and returns an ``alt.Chart``.
"""

from __future__ import annotations

import functools
import json

import altair as alt
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Choice, Range
from clusterlab.models.pipeline_sweeps import (
    PIPELINE_EXPLORER_SCHEDULES,
    schedule_sweep,
)

_PHASES = ["fwd", "bwd"]


_PHASE_COLORS = ["#0072B2", "#E69F00"]  # Okabe–Ito blue and orange


_PHASE_LEGEND = alt.Legend(labelExpr="datum.label == 'fwd' ? 'forward' : 'backward'")


# A measured Gantt chart may also show the time a rank sat blocked in recv.
_WAIT_PHASES = [*_PHASES, "recv"]


_WAIT_COLORS = [*_PHASE_COLORS, "#BBBBBB"]


_WAIT_LEGEND = alt.Legend(
    labelExpr="datum.label == 'fwd' ? 'forward' : datum.label == 'bwd' ? "
    "'backward' : 'waiting in recv'"
)


_STAGE_AXIS = "pipeline stage (rank)"


# p and m, on the live widget's sliders and the page's. The page carries every
# simulated case, so its sliders stop at the sweep's ends (``Range.up_to``).
PIPELINE_STAGES = Range("p", min=2, max=8, step=1, default=4, label="stages p ")
MICROBATCHES = Range("m", min=1, max=32, step=1, default=8, label="micro-batches m ")


def pipeline_gantt(
    df: pd.DataFrame,
    *,
    time_scale: float = 1.0,
    time_label: str = "time (one forward pass = 1)",
    title: str = "Who computes when",
    subtitle: str | None = None,
    idle_fraction: float | None = None,
    waits: pd.DataFrame | None = None,
) -> alt.LayerChart:
    """A Gantt chart of a pipeline step: one row per stage, one bar per pass.

    Args:
        df: ``stage, chunk, microbatch, phase, start, end`` rows.
        time_scale: factor from the table's time unit to the axis unit (1e3 to
            show seconds as milliseconds).
        time_label: the time axis's title, with its unit.
        title, subtitle: the chart's title and the line under it.
        idle_fraction: the stages' idle share, for the default subtitle (e.g.
            ``cl.models.pipeline.simulated_bubble(df)``); None leaves it out.
        waits: the same columns for the time each rank was blocked in recv
            (``cl.pipeline.ranks.pipeline_waits``), drawn as grey bars.

    Returns:
        Bars (blue forward, orange backward) labelled with the micro-batch;
        the gaps, white or grey, are the bubble.
    """
    cols = ["stage", "microbatch", "phase", "start", "end"]
    check_columns(df, cols)
    data = df[cols]
    if waits is not None:
        check_columns(waits, cols, "waits")
        data = pd.concat([data, waits[cols].assign(phase="recv")], ignore_index=True)
    if subtitle is None:
        idle = "white: idle" if waits is None else "grey: waiting in recv; white: idle"
        subtitle = f"blue: forward, orange: backward; number: micro-batch; {idle}"
        if idle_fraction is not None:
            subtitle += f" ({idle_fraction:.0%} of the stages' time)"
    chart = _gantt_layers(float(time_scale), time_label, waits is not None)
    chart = chart.copy(deep=False)
    chart.data = data.round({"start": 4, "end": 4})
    height = max(80, 28 * int(df["stage"].nunique()))
    return chart.properties(
        height=height, title=alt.TitleParams(title, subtitle=subtitle)
    )


@functools.lru_cache(maxsize=8)
def _gantt_layers(time_scale: float, time_label: str, waits: bool) -> alt.LayerChart:
    # Built once per axis and reused with new data: building the encodings is
    # most of a chart's cost, and a widget redraws on every slider move.
    base = (
        alt.Chart()
        .transform_calculate(
            t0=f"datum.start * {time_scale}",
            t1=f"datum.end * {time_scale}",
            mid=f"(datum.start + datum.end) / 2 * {time_scale}",
        )
        .encode(y=alt.Y("stage:O", title=_STAGE_AXIS))
    )
    bars = base.mark_bar(stroke="white", strokeWidth=0.5).encode(
        x=alt.X("t0:Q", title=time_label),
        x2="t1:Q",
        color=alt.Color(
            "phase:N",
            scale=alt.Scale(
                domain=_WAIT_PHASES if waits else _PHASES,
                range=_WAIT_COLORS if waits else _PHASE_COLORS,
            ),
            title="pass",
            legend=_WAIT_LEGEND if waits else _PHASE_LEGEND,
        ),
        tooltip=[
            "stage:O",
            "microbatch:O",
            "phase:N",
            alt.Tooltip("t0:Q", title="start", format=".3g"),
            alt.Tooltip("t1:Q", title="end", format=".3g"),
        ],
    )
    labels = (
        base.transform_filter("datum.phase != 'recv'")
        .mark_text(fontSize=9, color="white")
        .encode(x="mid:Q", text="microbatch:O")
    )
    return alt.layer(bars, labels)


def pipeline_bubble_chart(
    df: pd.DataFrame, curve: pd.DataFrame, title: str | None = None
) -> alt.LayerChart:
    """Measured idle fraction against micro-batches, over the formula's curve.

    Args:
        df: ``microbatches, schedule, bubble`` rows (measured idle fractions).
        curve: ``cl.models.pipeline_sweeps.bubble_curve``'s table (``stages,
            microbatches, bubble``), the dashed formula.
        title: the chart's title.
    """
    check_columns(df, ["microbatches", "schedule", "bubble"])
    check_columns(curve, ["stages", "microbatches", "bubble"], "curve")
    p = int(curve["stages"].iloc[0])
    x = alt.X("microbatches:Q", title="micro-batches per step, m")
    y = alt.Y("bubble:Q", title="idle fraction of the step", axis=alt.Axis(format="%"))
    line = (
        alt.Chart(curve)
        .mark_line(color="#000", strokeDash=[6, 3])
        .encode(x=x, y=y, tooltip=[alt.Tooltip("bubble:Q", format=".1%")])
    )
    points = (
        alt.Chart(df)
        .mark_point(size=90)
        .encode(
            x=x,
            y=y,
            color=alt.Color("schedule:N", title="schedule (measured)"),
            shape="schedule:N",
            tooltip=[
                "schedule:N",
                "microbatches:Q",
                alt.Tooltip("bubble:Q", format=".1%"),
            ],
        )
    )
    title = title or f"Measured bubble against (p − 1) / (m + p − 1), p = {p}"
    return alt.layer(line, points).properties(
        title=alt.TitleParams(
            title, subtitle="points: measured on this machine; dashed: the formula"
        )
    )


def _num(t: float):
    # Whole numbers as ints: most start times are, and "12" is shorter than "12.0".
    t = round(float(t), 3)
    return int(t) if t.is_integer() else t


@functools.lru_cache(maxsize=4)
def _compact(max_p: int, max_m: int):
    """The sweep as compact per-case arrays (one JSON object per case)."""
    ops, notes = schedule_sweep(max_p, max_m)
    cases = [
        {
            "k": key,
            "v": int(g["v"].iloc[0]),
            "s": g["stage"].tolist(),
            "b": g["microbatch"].tolist(),
            "c": g["chunk"].tolist(),
            "f": (g["phase"] == "bwd").astype(int).tolist(),
            "t": [_num(t) for t in g["start"]],
        }
        for key, g in ops.groupby("key", sort=False)
    ]
    msgs = zip(notes["key"], notes["msg"], strict=True)
    return cases, [{"k": k, "msg": m} for k, m in msgs]


def _inline(rows: list) -> alt.InlineData:
    # A JSON string, not Python lists: Altair then neither validates nor copies
    # thousands of numbers one by one, and the page carries no spaces.
    text = json.dumps(rows, separators=(",", ":"))
    return alt.InlineData(values=text, format=alt.DataFormat(type="json"))


def pipeline_schedule_explorer(
    max_stages: int = 8, max_microbatches: int = 12
) -> alt.LayerChart:
    """A Gantt chart with a schedule radio and p, m sliders that work offline.

    Every case is simulated beforehand by
    ``cl.models.pipeline_sweeps.schedule_sweep`` (forward 1 unit, backward 2);
    the page only picks one with Vega-Lite parameters, so the sliders work in
    the built book with no kernel.

    Args:
        max_stages: largest p on the slider, in [2, 8].
        max_microbatches: largest m on the slider, in [1, 16].
    """
    schedule_sweep(max_stages, max_microbatches)  # checks the arguments
    max_p, max_m = int(max_stages), int(max_microbatches)
    cases, notes = _compact(max_p, max_m)
    labels = list(PIPELINE_EXPLORER_SCHEDULES)
    sched = Choice("sched", options=labels, default="1F1B", label="schedule ").param()
    p = PIPELINE_STAGES.up_to(max_p).param()
    m = MICROBATCHES.up_to(max_m).param()
    pick = "datum.k == sched + '|' + p + '|' + m"
    ops = (
        alt.Chart(_inline(cases))
        .transform_filter(pick)
        .transform_flatten(["s", "b", "c", "f", "t"])
        .transform_calculate(
            phase="datum.f == 1 ? 'bwd' : 'fwd'",
            t1="datum.t + (datum.f == 1 ? 2 : 1) / datum.v",
            mid="datum.t + (datum.f == 1 ? 1 : 0.5) / datum.v",
        )
    )
    y = alt.Y("s:O", title=_STAGE_AXIS)
    bars = ops.mark_bar(stroke="white", strokeWidth=0.5).encode(
        x=alt.X("t:Q", title="time (one forward pass of a whole stage = 1)"),
        x2="t1:Q",
        y=y,
        color=alt.Color(
            "phase:N",
            scale=alt.Scale(domain=_PHASES, range=_PHASE_COLORS),
            title="pass",
            legend=_PHASE_LEGEND,
        ),
        opacity=alt.Opacity("c:O", scale=alt.Scale(range=[1.0, 0.6]), legend=None),
        tooltip=[
            alt.Tooltip("s:O", title="stage"),
            alt.Tooltip("b:O", title="micro-batch"),
            alt.Tooltip("c:O", title="chunk"),
            "phase:N",
            alt.Tooltip("t:Q", title="start"),
        ],
    )
    text = ops.mark_text(fontSize=9, color="white").encode(x="mid:Q", y=y, text="b:O")
    note = (
        alt.Chart(_inline(notes))
        .transform_filter(pick)
        .mark_text(align="left", baseline="bottom", fontSize=12, dy=-4)
        .encode(x=alt.value(0), y=alt.value(0), text="msg:N")
    )
    return (
        alt.layer(bars, text, note)
        .add_params(sched, p, m)
        .properties(
            height=230,
            title=alt.TitleParams(
                "Pipeline schedules: pick p, m and a schedule",
                subtitle="blue: forward, orange: backward, number: micro-batch, "
                "paler: a GPU's second model chunk; white gaps: the bubble",
            ),
        )
    )


__all__ = [
    "PIPELINE_EXPLORER_SCHEDULES",
    "pipeline_bubble_chart",
    "pipeline_gantt",
    "pipeline_schedule_explorer",
]
