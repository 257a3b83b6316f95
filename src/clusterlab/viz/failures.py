"""Charts of failure: what survivors see, heartbeat detectors, checkpoint goodput.

Builders take the DataFrames of ``cl.dist.failure``, ``cl.sim.heartbeat`` and
``cl.sim.failures`` and return Altair charts; the explorers carry Vega-Lite
sliders, so they stay interactive in the built book with no kernel.
"""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

from .messages import _check_columns

__all__ = [
    "goodput_chart",
    "goodput_explorer",
    "heartbeat_chart",
    "heartbeat_explorer",
    "job_timeline_chart",
    "survivor_chart",
]

HOUR_S = 3600.0
TIMEOUT_AXIS = "detector timeout (s)"
INTERVAL_AXIS = "checkpoint interval (s of work, log scale)"


def survivor_chart(
    df: pd.DataFrame, title: str = "How long each survivor took to learn of the fault"
) -> alt.Chart:
    """Seconds from the fault to each survivor's exception, by kind of fault.

    Args:
        df: columns ``fault``, ``rank``, ``learned_s`` (from ``run_fault``).
    """
    _check_columns(df, ["fault", "rank", "learned_s"])
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
    _check_columns(
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


def heartbeat_explorer(
    grid: pd.DataFrame,
    title: str = "Move the sliders: jitter and loss against the timeout",
) -> alt.HConcatChart:
    """``heartbeat_chart`` over a precomputed grid, with jitter and loss sliders.

    Args:
        grid: ``heartbeat_sweep`` rows with extra integer columns ``jitter_ms``
            and ``loss_pct`` (the slider values; integers match exactly).
    """
    _check_columns(grid, ["jitter_ms", "loss_pct", "timeout_s"])
    jit = sorted(int(v) for v in grid["jitter_ms"].unique())
    loss = sorted(int(v) for v in grid["loss_pct"].unique())

    def step(values):
        gaps = {b - a for a, b in zip(values, values[1:], strict=False)}
        return min(gaps) if gaps else 1

    j = alt.param(
        name="jitter_ms",
        value=jit[len(jit) // 2],
        bind=alt.binding_range(
            min=jit[0], max=jit[-1], step=step(jit), name="mean jitter (ms) "
        ),
    )
    p = alt.param(
        name="loss_pct",
        value=loss[len(loss) // 2],
        bind=alt.binding_range(
            min=loss[0], max=loss[-1], step=step(loss), name="heartbeats lost (%) "
        ),
    )
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
    _check_columns(sweep, ["interval_s", "goodput", "model_goodput"])
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
    gpus = alt.param(
        name="log2_gpus",
        value=round(math.log2(n_gpus)),
        bind=alt.binding_range(min=3, max=15, step=1, name="log2(GPUs) "),
    )
    mtbf = alt.param(
        name="gpu_mtbf_h",
        value=gpu_mtbf_h,
        bind=alt.binding_range(
            min=5_000, max=200_000, step=5_000, name="MTBF of one GPU (h) "
        ),
    )
    cost = alt.param(
        name="ckpt_s",
        value=checkpoint_cost_s,
        bind=alt.binding_range(min=5, max=600, step=5, name="checkpoint cost (s) "),
    )
    restart = alt.param(
        name="restart_s",
        value=restart_s,
        bind=alt.binding_range(min=0, max=1800, step=30, name="restart cost (s) "),
    )
    mtbf_expr = "gpu_mtbf_h * 3600 / pow(2, log2_gpus)"
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
        .transform_calculate(interval_s="pow(10, datum.log_tau)", m=mtbf_expr)
        .transform_calculate(
            goodput="datum.interval_s / (datum.m * exp(restart_s / datum.m)"
            " * (exp((datum.interval_s + ckpt_s) / datum.m) - 1))"
        )
        .mark_line(color="#0072B2")
        .encode(x=x, y=y)
    )
    rule = (
        alt.Chart(pd.DataFrame({"k": [0]}))
        .transform_calculate(m=mtbf_expr)
        .transform_calculate(interval_s="sqrt(2 * ckpt_s * datum.m)")
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
    """The phases of ``cl.sim.failures.simulate`` as a strip, coloured by kind."""
    _check_columns(phases, ["start_s", "end_s", "phase", "kept"])
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
