"""Charts of long-sequence training: CP's memory, traffic and exposed time.

The tables come from ``cl.models.long_context`` (memory, bytes and time
sweeps) and from the long-context lab's measured work per rank.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.units import GB as _GB

_METHODS = ["ring attention", "Ulysses", "TP + SP"]


def cp_time_chart(df: pd.DataFrame, title: str | None = None) -> alt.Chart:
    """Exposed communication's share of a layer, per sequence length and method.

    A radio button picks the link the ranks share (inside a node or across).

    Args:
        df: ``cl.models.long_context.long_context_time_sweep``'s table.
        title: the chart's title.
    """
    need = ["model", "gpu", "method", "where", "seq_len", "degree", "exposed_share"]
    check_columns(df, need)
    wheres = list(dict.fromkeys(df["where"]))
    pick = alt.param(
        name="cp_link",
        value=wheres[-1],
        bind=alt.binding_radio(options=wheres, name="ranks joined "),
    )
    data = df[need].assign(seq_k=df["seq_len"] / 1024)
    degree = int(df["degree"].iloc[0])
    return (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=alt.X(
                "seq_k:Q",
                title="sequence length (K tokens)",
                scale=alt.Scale(type="log", base=2),
            ),
            y=alt.Y(
                "exposed_share:Q",
                title="share of the layer's forward time spent waiting",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color("method:N", title="split", sort=_METHODS),
            tooltip=[
                "method:N",
                alt.Tooltip("seq_k:Q", title="K tokens"),
                alt.Tooltip("exposed_share:Q", format=".1%", title="waiting"),
            ],
        )
        .add_params(pick)
        .transform_filter("datum.where == cp_link")
        .properties(
            width=380,
            height=240,
            title=alt.TitleParams(
                title or "Ring attention hides its traffic once shards are long",
                subtitle=f"model: {df['model'].iloc[0]}, {degree} H100 per "
                "sequence or layer, causal, zig-zag ring",
            ),
        )
    )


def cp_memory_chart(df: pd.DataFrame, title: str | None = None) -> alt.LayerChart:
    """Activation memory per GPU against the CP degree, with the GPU's memory.

    Args:
        df: ``cl.models.long_context.long_context_memory_sweep``'s table.
        title: the chart's title.
    """
    need = ["model", "seq_len", "cp", "recompute", "activation_bytes", "hbm_bytes"]
    check_columns(df, need)
    data = df[need].assign(
        activation_GB=df["activation_bytes"] / _GB,
        hbm_GB=df["hbm_bytes"] / _GB,
        kept=df["recompute"].map(
            {"none": "every activation", "full": "layer inputs (full recompute)"}
        ),
    )
    log_y = alt.Scale(type="log")
    lines = (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=alt.X(
                "cp:O",
                title="context-parallel degree (GPUs per sequence)",
                axis=alt.Axis(labelAngle=0),
            ),
            y=alt.Y(
                "activation_GB:Q",
                title="activation memory per GPU (GB, log scale)",
                scale=log_y,
            ),
            color=alt.Color(
                "kept:N", title="kept for backward", legend=alt.Legend(labelLimit=260)
            ),
            tooltip=[
                "cp:O",
                "kept:N",
                alt.Tooltip("activation_GB:Q", format=".1f", title="GB"),
            ],
        )
    )
    hbm = (
        alt.Chart(data.head(1))
        .mark_rule(strokeDash=[4, 3], color="black")
        .encode(
            y=alt.Y("hbm_GB:Q", scale=log_y),
            tooltip=[alt.Tooltip("hbm_GB:Q", title="HBM GB")],
        )
    )
    seq_k = int(df["seq_len"].iloc[0]) // 1024
    return (lines + hbm).properties(
        width=380,
        height=240,
        title=alt.TitleParams(
            title or f"At {seq_k}K tokens, activations alone overflow one GPU",
            subtitle=f"model: {df['model'].iloc[0]}, one sequence; dashed: one "
            f"GPU's memory ({data['hbm_GB'].iloc[0]:.0f} GB)",
        ),
    )


def cp_work_chart(df: pd.DataFrame, title: str | None = None) -> alt.Chart:
    """Causal attention work per rank, contiguous shards against zig-zag.

    Args:
        df: ``layout, rank, scores`` rows (measured by the ring's counters).
        title: the chart's title.
    """
    check_columns(df, ["layout", "rank", "scores"])
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X("rank:O", title="rank", axis=alt.Axis(labelAngle=0)),
            xOffset="layout:N",
            y=alt.Y("scores:Q", title="query-key scores computed"),
            color=alt.Color("layout:N", title="layout"),
            tooltip=["layout:N", "rank:O", "scores:Q"],
        )
        .properties(
            width=300,
            height=200,
            title=title or "Zig-zag gives every rank the same causal work",
        )
    )


__all__ = ["cp_memory_chart", "cp_time_chart", "cp_work_chart"]
