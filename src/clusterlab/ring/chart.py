"""Charts for networks and collectives: all-reduce algorithms, ring timings, steps.

Builders take tidy DataFrames (made by ``models.allreduce_sweeps``,
``models.interconnects``, ``models.contention`` or a measurement) and return
Altair charts. Charts with controls filter a precomputed sweep with Vega-Lite
parameters, so they work in the built book without a kernel; nothing here
measures or prints.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from clusterlab.core.chart_checks import check_columns

_TIME_LOG = "time per all-reduce (s, log scale)"


def allreduce_algorithms_chart(
    df: pd.DataFrame,
    title: str = "Ring, tree and hierarchical all-reduce as the cluster grows",
) -> alt.Chart:
    """Time against GPU count for each algorithm; radios and a slider pick the case.

    Args:
        df: ``cl.models.allreduce_sweeps.allreduce_model_sweep`` output (or
            one case of it).
    """
    cols = ["algorithm", "gpus", "alpha_us", "bandwidth_GBps", "log2_bytes", "time_s"]
    check_columns(df, cols)
    alphas = sorted(df["alpha_us"].unique().tolist())
    bws = sorted(df["bandwidth_GBps"].unique().tolist())
    sizes = sorted(int(k) for k in df["log2_bytes"].unique())
    p_alpha = alt.param(
        name="alpha_us",
        value=alphas[len(alphas) // 2],
        bind=alt.binding_radio(options=alphas, name="latency per step α (µs) "),
    )
    p_bw = alt.param(
        name="bw_GBps",
        value=bws[len(bws) // 2],
        bind=alt.binding_radio(options=bws, name="network GB/s per GPU "),
    )
    step = sizes[1] - sizes[0] if len(sizes) > 1 else 1
    p_size = alt.param(
        name="log2_bytes",
        value=sizes[-2] if len(sizes) > 1 else sizes[0],
        bind=alt.binding_range(
            min=sizes[0], max=sizes[-1], step=step, name="log2 message bytes "
        ),
    )
    return (
        alt.Chart(df)
        .transform_filter(
            "datum.alpha_us == alpha_us && datum.bandwidth_GBps == bw_GBps "
            "&& datum.log2_bytes == log2_bytes"
        )
        .mark_line(point=True)
        .encode(
            x=alt.X(
                "gpus:Q", scale=alt.Scale(type="log", base=2), title="GPUs (log scale)"
            ),
            y=alt.Y("time_s:Q", scale=alt.Scale(type="log"), title=_TIME_LOG),
            color=alt.Color("algorithm:N", title="algorithm"),
            tooltip=[
                "algorithm",
                "gpus",
                alt.Tooltip("time_s:Q", title="seconds", format=".3e"),
            ],
        )
        .add_params(p_alpha, p_bw, p_size)
        .properties(
            title=alt.TitleParams(
                title,
                subtitle=[
                    "Small messages: latency steps decide (ring grows with the GPU "
                    "count).",
                    "Large ones: bandwidth decides, and all three converge.",
                ],
            )
        )
    )


def ring_timing_chart(
    df: pd.DataFrame, title: str = "Our ring against the built-in all-reduce"
) -> alt.Chart:
    """Measured time against size, one colour per implementation; radio: world size.

    Args:
        df: columns ``impl, world_size, size_bytes, time_s``.
    """
    check_columns(df, ["impl", "world_size", "size_bytes", "time_s"])
    sizes = sorted(int(w) for w in df["world_size"].unique())
    pick = alt.param(
        name="ranks",
        value=sizes[-1],
        bind=alt.binding_radio(options=sizes, name="world size "),
    )
    return (
        alt.Chart(df)
        .transform_filter("datum.world_size == ranks")
        .mark_line(point=True)
        .encode(
            x=alt.X(
                "size_bytes:Q",
                scale=alt.Scale(type="log"),
                title="message size (bytes, log scale)",
            ),
            y=alt.Y("time_s:Q", scale=alt.Scale(type="log"), title=_TIME_LOG),
            color=alt.Color("impl:N", title="implementation"),
            tooltip=[
                "impl",
                "world_size",
                alt.Tooltip("size_bytes:Q", format=","),
                alt.Tooltip("time_s:Q", format=".3e"),
            ],
        )
        .add_params(pick)
        .properties(
            title=alt.TitleParams(
                title, subtitle="measured on this machine; lower is faster"
            )
        )
    )


__all__ = ["allreduce_algorithms_chart", "ring_timing_chart"]
