"""Charts for data parallelism: where a step's time goes, DDP's buckets, ZeRO memory.

Every builder takes a tidy DataFrame and returns an Altair chart; nothing here
measures or computes a model. Charts with radio buttons filter a precomputed
sweep with Vega-Lite parameters, so they work in the book with no kernel.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Choice, Range
from clusterlab.core.units import GB
from clusterlab.models.compute import H100_SXM
from clusterlab.models.data_parallel import STATE_KINDS


def dp_step_chart(
    df: pd.DataFrame,
    title: str = "Where a data-parallel step's time goes on this machine",
) -> alt.Chart:
    """Stacked bars: compute and communication per step, by world size and mode.

    Args:
        df: columns ``world_size, mode, part, seconds`` (one row per part).
    """
    check_columns(df, ["world_size", "mode", "part", "seconds"])
    data = df.assign(ms=df["seconds"] * 1e3)
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("world_size:O", title="ranks (world size)"),
            y=alt.Y("sum(ms):Q", title="time per step (ms)"),
            color=alt.Color("part:N", title="part of the step"),
            column=alt.Column("mode:N", title="how gradients are averaged"),
            tooltip=[
                "mode",
                "world_size",
                "part",
                alt.Tooltip("ms:Q", title="ms", format=".2f"),
            ],
        )
        .properties(
            width=220,
            height=260,
            title=alt.TitleParams(
                title,
                subtitle="fixed batch per rank: ideal scaling keeps each bar as "
                "short as one rank's; what grows is the all-reduce",
            ),
        )
    )


# Ranks and the backward pass's scale: the live widget's sliders, and the page's
# radios over the sweep's cases (Range.points). The scale moves by its log10.
BUCKET_RANKS = Range("ranks", min=2, max=64, step=1, default=4, label="ranks ")
COMPUTE_SCALE = Range(
    "scale", min=-2.0, max=3.0, step=0.25, default=0.0, log_base=10,
    label="backward pass × ", widget_label="backward ×",
)  # fmt: skip


def bucket_chart(
    sweep: pd.DataFrame,
    title: str = "How many buckets? Backward pass plus the all-reduces it cannot hide",
    *,
    controls: bool = True,
) -> alt.LayerChart:
    """Time until gradients are averaged against DDP's bucket count; radios pick.

    Args:
        sweep: ``cl.models.data_parallel.bucket_sweep``'s DataFrame.
        controls: radio buttons for ranks and compute scale (False: the sweep
            must hold one of each, as in the live widget).
    """
    need = ["world_size", "compute_scale", "buckets", "backward_s", "done_s"]
    check_columns(sweep, need, "sweep")
    data = sweep.assign(done_ms=sweep["done_s"] * 1e3, bwd_ms=sweep["backward_s"] * 1e3)
    sizes = sorted(int(v) for v in data["world_size"].unique())
    scales = sorted(float(v) for v in data["compute_scale"].unique())
    x = alt.X("buckets:Q", scale=alt.Scale(type="log", base=2), title="buckets")
    y_title = "time until gradients are averaged (ms, log scale)"
    base = alt.Chart(data)
    if controls:  # the sweep's cases, each one the live sliders reach
        ranks = BUCKET_RANKS.points(sizes).param(value=sizes[min(1, len(sizes) - 1)])
        scale = COMPUTE_SCALE.points(scales).param(value=scales[0])
        base = base.transform_filter(
            (alt.datum.world_size == ranks) & (alt.datum.compute_scale == scale)
        )
    line = base.mark_line(point=True).encode(
        x=x,
        y=alt.Y("done_ms:Q", scale=alt.Scale(type="log"), title=y_title),
        tooltip=[
            "buckets",
            alt.Tooltip("done_ms:Q", title="ms", format=".3f"),
            alt.Tooltip("bwd_ms:Q", title="backward ms", format=".3f"),
        ],
    )
    floor = base.mark_line(strokeDash=[6, 3], color="#000").encode(
        x=x, y=alt.Y("bwd_ms:Q", scale=alt.Scale(type="log"))
    )
    chart = alt.layer(line, floor)
    if controls:
        chart = chart.add_params(ranks, scale)
    return chart.properties(
        title=alt.TitleParams(
            title,
            subtitle="dashed: the backward pass alone (perfect overlap); "
            "left: late start, right: latency paid per bucket",
        )
    )


# The ZeRO stage, on the live widget's buttons and the page's radio (the
# stages the sweep holds).
ZERO_STAGE = Choice(
    "stage", options=(0, 1, 2, 3), default=3, label="ZeRO stage ", widget_kind="toggle"
)


def zero_memory_chart(
    sweep: pd.DataFrame,
    gpu_bytes: float | None = None,
    title: str = "Model state per GPU: ZeRO stage against data-parallel degree",
    *,
    controls: bool = True,
) -> alt.LayerChart:
    """Stacked bytes per GPU (weights, grads, optimizer) by DP degree; radios pick.

    Args:
        sweep: ``cl.models.data_parallel.zero_memory_sweep``'s DataFrame.
        gpu_bytes: a GPU's memory, drawn as a rule (None: the H100 SXM5's,
            from ``data/gpu_specs.csv``).
        controls: radio buttons for stage and model size (False: the sweep must
            hold one of each, as in the live widget).
    """
    check_columns(sweep, ["n_params", "dp", "zero_stage", "kind", "bytes"], "sweep")
    gpu_bytes = H100_SXM.memory_bytes if gpu_bytes is None else gpu_bytes
    data = sweep.assign(
        gb=sweep["bytes"] / GB,
        model=(sweep["n_params"] / 1e9).map(lambda b: f"{b:g}B"),
    )
    models = list(dict.fromkeys(data["model"]))
    stages = sorted(int(s) for s in data["zero_stage"].unique())
    stage = ZERO_STAGE.among(stages).param(value=stages[-1])
    model = alt.param(
        name="model",
        value=models[min(1, len(models) - 1)],
        bind=alt.binding_radio(options=models, name="parameters "),
    )
    base = alt.Chart(data)
    if controls:
        base = base.transform_filter(
            (alt.datum.zero_stage == stage) & (alt.datum.model == model)
        )
    bars = base.mark_bar().encode(
        x=alt.X("dp:O", title="data-parallel degree (GPUs sharing the state)"),
        y=alt.Y("sum(gb):Q", title="model state per GPU (GB)"),
        color=alt.Color("kind:N", sort=list(STATE_KINDS), title="state"),
        order=alt.Order("kind:N"),
        tooltip=["dp", "kind", alt.Tooltip("gb:Q", title="GB", format=".2f")],
    )
    rule = (
        alt.Chart(pd.DataFrame({"gb": [gpu_bytes / GB]}))
        .mark_rule(color="#D55E00", strokeDash=[6, 3])
        .encode(y="gb:Q")
    )
    chart = alt.layer(bars, rule)
    if controls:
        chart = chart.add_params(stage, model)
    return chart.properties(
        title=alt.TitleParams(
            title,
            subtitle=f"mixed-precision Adam, 16 bytes per parameter unsharded; "
            f"dashed: {gpu_bytes / GB:g} GB of GPU memory; activations not shown",
        )
    )


def fsdp_memory_chart(
    table: pd.DataFrame,
    title: str = "FSDP2: bytes each rank holds, measured against ZeRO-3",
) -> alt.LayerChart:
    """Measured bytes per rank (points) and the formula (dashed) by world size.

    Args:
        table: ``cl.fsdp.ranks.fsdp_vs_formula``'s DataFrame.
    """
    need = ["world_size", "kind", "measured_bytes", "formula_bytes"]
    check_columns(table, need, "table")
    data = table.assign(
        measured_mb=table["measured_bytes"] / 1e6,
        formula_mb=table["formula_bytes"] / 1e6,
    )
    x = alt.X(
        "world_size:Q",
        scale=alt.Scale(type="log", base=2),
        axis=alt.Axis(values=sorted(data["world_size"].unique().tolist())),
        title="ranks (world size, log scale)",
    )
    y_title = "bytes per rank (MB, log scale)"
    color = alt.Color("kind:N", sort=[*STATE_KINDS, "total"], title="state")
    lines = (
        alt.Chart(data)
        .mark_line(strokeDash=[6, 3])
        .encode(
            x=x,
            y=alt.Y("formula_mb:Q", scale=alt.Scale(type="log"), title=y_title),
            color=color,
        )
    )
    points = (
        alt.Chart(data)
        .mark_point(size=90)
        .encode(
            x=x,
            y=alt.Y("measured_mb:Q", scale=alt.Scale(type="log"), title=y_title),
            color=color,
            tooltip=[
                "world_size",
                "kind",
                alt.Tooltip("measured_mb:Q", title="measured MB", format=".4f"),
                alt.Tooltip("formula_mb:Q", title="formula MB", format=".4f"),
            ],
        )
    )
    return alt.layer(lines, points).properties(
        title=alt.TitleParams(
            title,
            subtitle="points: local shards measured on each run's busiest rank; "
            "dashed: 16 bytes per parameter / world size",
        )
    )


def overlap_chart(
    table: pd.DataFrame,
    title: str = "Across a slow link, buckets hide the all-reduce in the backward pass",
) -> alt.LayerChart:
    """Exposed communication against DDP's bucket count: measured and modelled.

    Args:
        table: ``cl.data_parallel.overlap.predicted``'s table.
    """
    check_columns(table, ["buckets", "exposed_s", "model_exposed_s", "allreduce_s"])
    rows = []
    for r in table.itertuples():
        rows.append({"buckets": r.buckets, "ms": r.exposed_s * 1e3, "what": "measured"})
        rows.append(
            {
                "buckets": r.buckets,
                "ms": r.model_exposed_s * 1e3,
                "what": "bucket model",
            }
        )
    data = pd.DataFrame(rows)
    comm_ms = float(table["allreduce_s"].median()) * 1e3
    x = alt.X("buckets:Q", title="buckets DDP made", axis=alt.Axis(tickMinStep=1))
    y = alt.Y("ms:Q", title="communication the backward pass did not hide (ms)")
    color = alt.Color("what:N", title=None)
    model = (
        alt.Chart(data[data["what"] == "bucket model"])
        .mark_line(strokeDash=[4, 3])
        .encode(x=x, y=y, color=color)
    )
    measured = (
        alt.Chart(data[data["what"] == "measured"])
        .mark_point(size=70, filled=True)
        .encode(
            x=x,
            y=y,
            color=color,
            shape=alt.Shape("what:N", legend=None),  # a dot against a dashed line
            tooltip=["buckets", alt.Tooltip("ms:Q", format=".0f")],
        )
    )
    return (model + measured).properties(
        width=420,
        height=260,
        title=alt.TitleParams(
            title,
            subtitle=[
                f"two emulated nodes; the gradients' all-reduce alone takes "
                f"{comm_ms:.0f} ms: one bucket shows all of it,",
                "more buckets start while the backward pass still runs",
            ],
        ),
    )


__all__ = [
    "bucket_chart",
    "dp_step_chart",
    "fsdp_memory_chart",
    "overlap_chart",
    "zero_memory_chart",
]
