"""Charts of fault tolerance: committed steps over time, and the goodput explorer.

``committed_steps_chart`` draws a measured run (``cl.fault_tolerance.measure``);
``goodput_chart`` draws ``cl.models.fault_tolerance.goodput_table``; and
``goodput_explorer``, its static twin, computes the same two curves in the page
from Vega expressions (the checkpointing topic's Daly and Young expressions and
``per_step_expr`` here), with sliders that share their specs with the live widget.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from clusterlab.checkpointing.chart import (
    CHECKPOINT_S,
    GPU_MTBF_H,
    RESTART_S,
    goodput_expr,
    job_mtbf_expr,
    young_expr,
)
from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Range

RECOVERY_S = Range(
    "recovery_s", min=1, max=120, step=1, default=10,
    label="per-step recovery (s) ", widget_label="recovery (s)",
)  # fmt: skip
GROUPS = Range(
    "n_groups", min=2, max=64, step=1, default=8,
    label="replica groups ", widget_label="groups",
)  # fmt: skip
EXPLORER_CONTROLS = (GPU_MTBF_H, CHECKPOINT_S, RESTART_S, RECOVERY_S, GROUPS)
METHODS = ["checkpoint-restart", "per-step recovery"]
LOG2_GPUS_RANGE = (3, 15)


def committed_steps_chart(
    log: pd.DataFrame,
    kill_time,
    restart_time=None,
    title: str = "Committed steps of each group, groups killed and restarted",
) -> alt.LayerChart:
    """Each group's committed step against time; rules at the kills and restarts.

    Args:
        log: a run's table (``step``, ``replica_id``, ``life``, ``time``).
        kill_time, restart_time: ``time.time()`` of each SIGKILL and restart
            (a number or a list of them; no restart rules when None).
    """
    check_columns(log, ["step", "replica_id", "life", "time", "participants"])
    t0 = float(log["time"].min())
    # At most about 150 points per group: a long run keeps the chart small.
    stride = max(1, int(log.groupby(["replica_id", "life"]).size().max()) // 150)
    keys = log.groupby(["replica_id", "life"])
    at, n = keys.cumcount(), keys["step"].transform("size")
    log = log[(at % stride == 0) | (at == n - 1)]
    data = log.assign(
        t_s=log["time"] - t0,
        group=log["replica_id"].map(lambda r: f"group {r}")
        + log["life"].map(lambda n: " (restarted)" if n else ""),
    )[["t_s", "step", "group", "participants"]]
    lines = (
        alt.Chart(data)
        .mark_line(point=alt.OverlayMarkDef(size=12))
        .encode(
            x=alt.X("t_s:Q", title="time since the first commit (s)"),
            y=alt.Y("step:Q", title="committed step"),
            color=alt.Color("group:N", title="group"),
            tooltip=[
                "group",
                "step",
                "participants",
                alt.Tooltip("t_s:Q", format=".2f"),
            ],
        )
    )
    as_list = lambda v: [] if v is None else list(pd.Series(v, dtype=float))  # noqa: E731
    marks = [{"t_s": t - t0, "event": "SIGKILL"} for t in as_list(kill_time)]
    marks += [{"t_s": t - t0, "event": "restart"} for t in as_list(restart_time)]
    rules = (
        alt.Chart(pd.DataFrame(marks))
        .mark_rule(strokeWidth=2, strokeDash=[4, 2], color="#D55E00")
        .encode(x="t_s:Q", tooltip=["event", alt.Tooltip("t_s:Q", format=".2f")])
    )
    labels = (
        alt.Chart(pd.DataFrame(marks))
        .mark_text(align="left", dx=4, dy=-6, color="#000", aria=False)
        .encode(x="t_s:Q", y=alt.value(8), text="event:N")
    )
    return alt.layer(lines, rules, labels).properties(
        title=alt.TitleParams(
            title,
            subtitle="the survivors go on with a smaller quorum; the restarted "
            "group heals from a live peer and joins at the current step",
        ),
        width=560,
        height=260,
    )


def _thin(d: pd.DataFrame, n: int) -> pd.DataFrame:
    """About ``n`` evenly spaced rows of ``d``, its first and last kept."""
    keep = list(range(0, len(d), max(1, len(d) // n))) + [len(d) - 1]
    return d.iloc[sorted(set(keep))]


def race_chart(restart_steps: pd.DataFrame, restart: dict, per_step_log: pd.DataFrame,
               per_step: dict, n_groups: int) -> alt.LayerChart:  # fmt: skip
    """The same failures, two jobs: the work each has done against time.

    Args:
        restart_steps: the checkpoint-restart run's steps (``attempt, step,
            time``; ``cl.fault_tolerance.race.RestartRun.steps``).
        restart, per_step: ``race.restart_costs`` and ``race.per_step_costs``.
        per_step_log: the per-step run's log (``FaultRun.log``).
        n_groups: the per-step run's groups.
    """
    check_columns(restart_steps, ["attempt", "step", "time"])
    check_columns(per_step_log, ["step", "time", "step_samples"])
    ckpt = restart_steps.sort_values("time")
    a = pd.DataFrame(
        {"t_s": ckpt["time"] - restart["begin"], "work": ckpt["step"] + 1.0}
    ).assign(job="checkpoint-restart")
    first = per_step_log.sort_values("time").groupby("step").first()
    first = first[first["time"] > per_step["begin"]]
    full = n_groups * per_step["batch"]
    b = pd.DataFrame(
        {
            "t_s": first["time"] - per_step["begin"],
            "work": first["step_samples"].map(len).cumsum() / full,
        }
    ).assign(job="per-step recovery")
    # About 100 points a job, keeping each attempt's first and last step (the
    # fall back to a checkpoint stays sharp); a chart stays well under 50 KB.
    attempts = ckpt["attempt"].to_numpy()
    parts = []
    stepped = sorted(set(attempts))
    for k, k_next in zip(stepped, [*stepped[1:], None], strict=True):
        mine = _thin(a[attempts == k], 40)
        parts.append(mine)
        nxt = a[attempts == k_next]
        if len(nxt) and k < len(restart["fail_at_s"]):
            # at the kill the work falls back to the checkpoint, and stays there
            # until the restarted job takes its first step
            t_kill = restart["fail_at_s"][k]
            back = float(nxt["work"].iloc[0]) - 1.0
            drop = [(t_kill, float(mine["work"].iloc[-1])), (t_kill, back)]
            drop.append((float(nxt["t_s"].iloc[0]) - restart["step_s"], back))
            parts.append(
                pd.DataFrame(drop, columns=["t_s", "work"]).assign(
                    job="checkpoint-restart"
                )
            )
    a = pd.concat(parts, ignore_index=True)
    data = pd.concat([a, _thin(b, 100)], ignore_index=True).round(3)
    data["order"] = range(len(data))
    lines = (
        alt.Chart(data)
        .mark_line(strokeWidth=2)
        .encode(
            x=alt.X("t_s:Q", title="seconds since the job's first step"),
            y=alt.Y("work:Q", title="work done (steps of the whole job)"),
            color=alt.Color("job:N", title="job", scale=alt.Scale(domain=METHODS)),
            strokeDash=alt.StrokeDash(
                "job:N", scale=alt.Scale(domain=METHODS, range=[[1, 0], [6, 3]])
            ),
            order="order:Q",
            tooltip=["job:N", alt.Tooltip("t_s:Q", format=".2f"), "work:Q"],
        )
    )
    kills = pd.DataFrame({"t_s": restart["fail_at_s"], "event": "SIGKILL"})
    rules = (
        alt.Chart(kills)
        .mark_rule(strokeDash=[2, 2], color="#555")
        .encode(x="t_s:Q", tooltip=["event", alt.Tooltip("t_s:Q", format=".2f")])
    )
    return alt.layer(lines, rules).properties(
        title=alt.TitleParams(
            "One failure schedule, two ways of recovering",
            subtitle=[
                "checkpoint-restart stops, falls back to its last checkpoint and "
                "restarts;",
                "per-step recovery stalls about a second, then goes on with fewer "
                "groups",
            ],
        ),
        width=520,
        height=260,
    )


def _goodput_layers(base: alt.Chart) -> alt.Chart:
    return base.mark_line(point=True).encode(
        x=alt.X(
            "gpus:Q", scale=alt.Scale(type="log", base=2), title="GPUs (log scale)"
        ),
        y=alt.Y("goodput:Q", scale=alt.Scale(domain=[0, 1]), title="goodput"),
        color=alt.Color("method:N", title="method", scale=alt.Scale(domain=METHODS)),
        tooltip=["method:N", "gpus:Q", alt.Tooltip("goodput:Q", format=".4f")],
    )


def goodput_chart(
    table: pd.DataFrame,
    title: str = "Goodput against job size: checkpoint-restart and per-step recovery",
) -> alt.Chart:
    """Both methods' goodput over GPUs (``goodput_table`` rows)."""
    check_columns(table, ["gpus", "method", "goodput"])
    return _goodput_layers(alt.Chart(table)).properties(
        title=alt.TitleParams(
            title, subtitle="job MTBF = GPU MTBF / GPUs; Daly at Young's interval"
        ),
        width=520,
        height=260,
    )


def per_step_expr(mtbf_s: str, recovery_s: str, rejoin_s: str, n_groups: str) -> str:
    """Vega expression for ``per_step_goodput(M, recovery, rejoin, groups)``."""
    m, a, r, n = (f"({e})" for e in (mtbf_s, recovery_s, rejoin_s, n_groups))
    return f"max(0, 1 - ({a} + max(0, {r} - {a}) / {n}) / {m})"


def goodput_explorer(
    title: str = "Move the sliders: goodput against job size",
) -> alt.Chart:
    """The two goodput curves computed in the page, with sliders (no kernel)."""
    params = [c.param() for c in EXPLORER_CONTROLS]
    lo, hi = LOG2_GPUS_RANGE
    grid = alt.sequence(lo, hi + 1, 1, as_="log2_gpus")
    m = job_mtbf_expr("gpu_mtbf_h", "datum.log2_gpus")
    ckpt = goodput_expr(
        young_expr("ckpt_s", "datum.m"), "ckpt_s", "datum.m", "restart_s"
    )
    step = per_step_expr("datum.m", "recovery_s", "restart_s", "n_groups")
    base = (
        alt.Chart(grid)
        .transform_calculate(gpus="pow(2, datum.log2_gpus)", m=m)
        .transform_calculate(checkpoint_restart=ckpt, per_step=step)
        .transform_fold(["checkpoint_restart", "per_step"], as_=["key", "goodput"])
        .transform_calculate(
            method="datum.key == 'per_step' ? 'per-step recovery' "
            ": 'checkpoint-restart'"
        )
    )
    return (
        _goodput_layers(base)
        .add_params(*params)
        .properties(
            title=alt.TitleParams(
                title,
                subtitle="checkpoint-restart: Daly's goodput at Young's interval; "
                "per-step: 1 - (recovery + (restart - recovery) / groups) / job MTBF",
            ),
            width=520,
            height=260,
        )
    )


def spike_chart(runs: dict, found: int) -> alt.LayerChart:
    """The loss of each run against the step, the flagged step marked.

    Args:
        runs: name -> ``cl.fault_tolerance.spikes.train`` rows (``step, loss``).
        found: the step the detector flagged.
    """
    frames = []
    for name, df in runs.items():
        check_columns(df, ["step", "loss"])
        frames.append(df[["step", "loss"]].assign(run=name).round({"loss": 5}))
    data = pd.concat(frames, ignore_index=True)
    lines = (
        alt.Chart(data)
        .mark_line(strokeWidth=1.5)
        .encode(
            x=alt.X("step:Q", title="step"),
            y=alt.Y("loss:Q", scale=alt.Scale(type="log"), title="loss (log scale)"),
            color=alt.Color("run:N", title=None, sort=list(runs)),
            strokeDash=alt.StrokeDash("run:N", sort=list(runs), legend=None),
        )
    )
    mark = (
        alt.Chart(pd.DataFrame({"step": [found]}))
        .mark_rule(color="#b2182b", strokeDash=[4, 3])
        .encode(x="step:Q")
    )
    return alt.layer(lines, mark).properties(
        width=560,
        height=220,
        title=alt.TitleParams(
            "One bad batch: the spike, the damage after it, and a run that skipped it",
            subtitle="red: the first step the detector flagged (a loss over five "
            "times the median of the 20 steps before it)",
        ),
    )


__all__ = [
    "spike_chart",
    "EXPLORER_CONTROLS",
    "GROUPS",
    "RECOVERY_S",
    "committed_steps_chart",
    "goodput_chart",
    "goodput_explorer",
    "per_step_expr",
    "race_chart",
]
