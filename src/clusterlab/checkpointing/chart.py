"""Charts of checkpointing: goodput against the interval, and a job's timeline.

Builders take the DataFrames of ``cl.checkpointing.sim`` and return Altair
charts. ``goodput_explorer`` carries Vega-Lite sliders, so it stays interactive
in the built book with no kernel: its curve and rule are the closed forms of
``cl.models.checkpointing`` written as Vega expressions. Each expression comes
from one function here (``job_mtbf_expr``, ``goodput_expr``, ``young_expr``),
and the tests evaluate them in Vega and compare them with the Python models.
"""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Range
from clusterlab.core.units import HOUR_S

INTERVAL_AXIS = "checkpoint interval (s of work, log scale)"

# The goodput explorer's controls, shared by the page's sliders and the live widget.
# The GPU count moves in powers of two: both sliders hold log2 of it.
LOG2_GPUS = Range(
    "log2_gpus", min=3, max=15, step=1, default=10,
    label="log2(GPUs) ", widget_label="log2 GPUs",
)  # fmt: skip
GPU_MTBF_H = Range(
    "gpu_mtbf_h", min=5_000, max=200_000, step=5_000, default=50_000,
    label="MTBF of one GPU (h) ", widget_label="GPU MTBF (h)",
)  # fmt: skip
CHECKPOINT_S = Range(
    "ckpt_s", min=5, max=600, step=5, default=60,
    label="checkpoint cost (s) ", widget_label="checkpoint (s)",
)  # fmt: skip
RESTART_S = Range(
    "restart_s", min=0, max=1800, step=30, default=300,
    label="restart cost (s) ", widget_label="restart (s)",
)  # fmt: skip
GOODPUT_CONTROLS = (LOG2_GPUS, GPU_MTBF_H, CHECKPOINT_S, RESTART_S)


def goodput_chart(
    sweep: pd.DataFrame,
    *,
    young_s: float | None = None,
    daly_s: float | None = None,
    title: str = "Goodput against the checkpoint interval",
) -> alt.LayerChart:
    """Simulated goodput (points) and Daly's closed form (line); rules at the optima.

    Args:
        sweep: ``goodput_sweep`` rows (``interval_s``, ``goodput``,
            ``model_goodput``).
        young_s, daly_s: intervals to mark, seconds.
    """
    check_columns(sweep, ["interval_s", "goodput", "model_goodput"])
    domain = [float(sweep["interval_s"].min()), float(sweep["interval_s"].max())]
    x = alt.X(
        "interval_s:Q",
        scale=alt.Scale(type="log", domain=domain, nice=False),
        title=INTERVAL_AXIS,
    )
    lo = max(0.0, float(sweep[["goodput", "model_goodput"]].min().min()) - 0.02)
    y = alt.Y(
        "goodput:Q", scale=alt.Scale(domain=[lo, 1.0]), title="goodput (fraction)"
    )
    base = alt.Chart(sweep)
    line = base.mark_line(color="#000", strokeDash=[6, 3]).encode(
        x=x, y=alt.Y("model_goodput:Q", scale=alt.Scale(domain=[lo, 1.0]))
    )
    points = base.mark_point(color="#0072B2").encode(
        x=x,
        y=y,
        tooltip=[
            alt.Tooltip("interval_s:Q", title="interval s", format=",.0f"),
            alt.Tooltip("goodput:Q", title="simulated", format=".4f"),
            alt.Tooltip("model_goodput:Q", title="model", format=".4f"),
        ],
    )
    layers = [line, points]
    marks = []
    if young_s is not None:
        marks.append({"interval_s": young_s, "rule": "Young"})
    if daly_s is not None:
        marks.append({"interval_s": daly_s, "rule": "Daly"})
    if marks:
        rules = (
            alt.Chart(pd.DataFrame(marks))
            .mark_rule(strokeWidth=2)
            .encode(
                x=x,
                color=alt.Color(
                    "rule:N",
                    title="interval rule",
                    scale=alt.Scale(
                        domain=["Young", "Daly"], range=["#E69F00", "#009E73"]
                    ),
                ),
                tooltip=["rule", alt.Tooltip("interval_s:Q", format=",.0f")],
            )
        )
        layers.append(rules)
    return alt.layer(*layers).properties(
        title=alt.TitleParams(
            title, subtitle="points: simulated job; dashed: Daly's closed form"
        )
    )


def job_mtbf_expr(part_mtbf_h: str, log2_parts: str) -> str:
    """Vega expression for ``job_mtbf(part_mtbf_h * HOUR_S, 2**log2_parts)``, s.

    Args: Vega expressions (a parameter's name, or ``datum.<field>``).
    """
    return f"{part_mtbf_h} * {HOUR_S:g} / pow(2, {log2_parts})"


def goodput_expr(interval_s: str, cost_s: str, mtbf_s: str, restart_s: str) -> str:
    """Vega expression for Daly's exact ``goodput(tau, C, M, R)``.

    ``tau / (M * exp(R / M) * (exp((tau + C) / M) - 1))``; the arguments are
    Vega expressions for the interval, checkpoint cost, MTBF and restart (s).
    """
    tau, c, m, r = (f"({e})" for e in (interval_s, cost_s, mtbf_s, restart_s))
    return f"{tau} / ({m} * exp({r} / {m}) * (exp(({tau} + {c}) / {m}) - 1))"


def young_expr(cost_s: str, mtbf_s: str) -> str:
    """Vega expression for Young's interval ``sqrt(2 * C * M)``, seconds."""
    return f"sqrt(2 * ({cost_s}) * ({mtbf_s}))"


def goodput_explorer(
    *,
    n_gpus: int = 1024,
    gpu_mtbf_h: float = 50_000.0,
    checkpoint_cost_s: float = 60.0,
    restart_s: float = 300.0,
    title: str = "Move the sliders: goodput against the checkpoint interval",
) -> alt.LayerChart:
    """Daly's goodput curve computed in the page, with sliders for the job.

    The sliders set log2 of the GPU count, each GPU's MTBF (hours), the
    checkpoint cost and the restart cost; the curve and the Young interval
    (orange rule) are Vega expressions, so the chart works with no kernel.
    """
    gpus = LOG2_GPUS.param(value=round(math.log2(n_gpus)))
    mtbf = GPU_MTBF_H.param(value=gpu_mtbf_h)
    cost = CHECKPOINT_S.param(value=checkpoint_cost_s)
    restart = RESTART_S.param(value=restart_s)
    grid = alt.sequence(1.0, 5.0, 0.02, as_="log_tau")
    x = alt.X(
        "interval_s:Q",
        scale=alt.Scale(type="log", domain=[10, 100_000]),
        title=INTERVAL_AXIS,
    )
    y = alt.Y(
        "goodput:Q",
        scale=alt.Scale(domain=[0, 1], clamp=True),
        title="goodput (fraction)",
    )
    curve = (
        alt.Chart(grid)
        .transform_calculate(
            interval_s="pow(10, datum.log_tau)",
            m=job_mtbf_expr("gpu_mtbf_h", "log2_gpus"),
        )
        .transform_calculate(
            goodput=goodput_expr("datum.interval_s", "ckpt_s", "datum.m", "restart_s")
        )
        .mark_line(color="#0072B2")
        .encode(x=x, y=y)
    )
    rule = (
        alt.Chart(pd.DataFrame({"k": [0]}))
        .transform_calculate(m=job_mtbf_expr("gpu_mtbf_h", "log2_gpus"))
        .transform_calculate(interval_s=young_expr("ckpt_s", "datum.m"))
        .mark_rule(color="#E69F00", strokeWidth=2)
        .encode(
            x=x,
            tooltip=[
                alt.Tooltip("interval_s:Q", title="Young interval s", format=",.0f"),
                alt.Tooltip("m:Q", title="job MTBF s", format=",.0f"),
            ],
        )
    )
    return (
        alt.layer(curve, rule)
        .add_params(gpus, mtbf, cost, restart)
        .properties(
            title=alt.TitleParams(
                title,
                subtitle="blue: Daly's goodput; orange: Young's interval "
                "sqrt(2 × cost × job MTBF), job MTBF = GPU MTBF / GPUs",
            )
        )
    )


def job_timeline_chart(
    phases: pd.DataFrame, title: str = "One job's timeline: work, checkpoints, failures"
) -> alt.Chart:
    """The phases of ``cl.checkpointing.sim.simulate`` as a strip, by kind."""
    check_columns(phases, ["start_s", "end_s", "phase", "kept"])
    kind = phases["phase"].where(
        phases["kept"] | (phases["phase"] == "restart"), "lost " + phases["phase"]
    )
    data = phases.assign(
        kind=kind, start_h=phases["start_s"] / HOUR_S, end_h=phases["end_s"] / HOUR_S
    )
    order = ["work", "checkpoint", "lost work", "lost checkpoint", "restart"]
    return (
        alt.Chart(data)
        .mark_bar(height=28)
        .encode(
            x=alt.X("start_h:Q", title="wall-clock time (h)"),
            x2="end_h:Q",
            color=alt.Color(
                "kind:N",
                title="phase",
                scale=alt.Scale(
                    domain=order,
                    range=["#009E73", "#56B4E9", "#D55E00", "#CC79A7", "#000000"],
                ),
            ),
            tooltip=[
                "kind",
                alt.Tooltip("start_h:Q", format=".2f"),
                alt.Tooltip("end_h:Q", format=".2f"),
            ],
        )
        .properties(title=title, height=60)
    )


__all__ = [
    "goodput_chart",
    "goodput_explorer",
    "goodput_expr",
    "job_mtbf_expr",
    "job_timeline_chart",
    "young_expr",
]
