"""Charts for networks and collectives: all-reduce algorithms, ring timings, steps.

Builders take tidy DataFrames (made by ``models.allreduce_sweeps``,
``models.interconnects``, ``models.contention`` or a measurement) and return
Altair charts. Charts with controls filter a precomputed sweep with Vega-Lite
parameters, so they work in the built book without a kernel; nothing here
measures or prints.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ._checks import check_columns

__all__ = [
    "allreduce_algorithms_chart",
    "contention_chart",
    "ring_timing_chart",
    "step_time_chart",
]

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
                subtitle="Small messages: latency steps decide (ring grows with the "
                "GPU count). Large ones: bandwidth decides, and all three converge.",
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


def step_time_chart(
    df: pd.DataFrame,
    *,
    controls: bool = True,
    title: str = "One training step: compute and the communication it cannot hide",
) -> alt.Chart:
    """Stacked bars per link: compute and exposed all-reduce seconds per step.

    Args:
        df: ``interconnect_sweep`` output.
        controls: add radios (model size, NICs per node) and a slider (log2
            tokens per GPU) that filter ``df``; without them ``df`` must hold one
            case per link.
    """
    cols = ["link", "n_params", "tokens_per_gpu", "nics_per_node"]
    check_columns(df, [*cols, "compute_s", "exposed_s", "step_s"])
    data = df.assign(
        params_B=(df["n_params"] / 1e9).round(1),
        log2_tokens=np.log2(df["tokens_per_gpu"]).round().astype(int),
        compute=df["compute_s"],
        communication=df["exposed_s"],
    )
    chart = alt.Chart(
        data[[*cols, "params_B", "log2_tokens", "compute", "step_s", "communication"]]
    )
    if controls:
        models = sorted(data["params_B"].unique().tolist())
        nics = sorted(int(v) for v in data["nics_per_node"].unique())
        toks = sorted(int(v) for v in data["log2_tokens"].unique())
        params = [
            alt.param(
                name="model_B",
                value=models[0],
                bind=alt.binding_radio(options=models, name="model (B params) "),
            ),
            alt.param(
                name="nics",
                value=nics[0],
                bind=alt.binding_radio(options=nics, name="NICs per node "),
            ),
            alt.param(
                name="log2_tok",
                value=toks[len(toks) // 2],
                bind=alt.binding_range(
                    min=toks[0], max=toks[-1], step=1, name="log2 tokens per GPU "
                ),
            ),
        ]
        chart = chart.add_params(*params).transform_filter(
            "datum.params_B == model_B && datum.nics_per_node == nics "
            "&& datum.log2_tokens == log2_tok"
        )
    order = list(dict.fromkeys(df["link"]))
    return (
        chart.transform_fold(["compute", "communication"], as_=["part", "seconds"])
        .mark_bar()
        .encode(
            y=alt.Y("link:N", sort=order, title="network between nodes"),
            x=alt.X("seconds:Q", stack="zero", title="seconds per training step"),
            color=alt.Color(
                "part:N",
                title="part of the step",
                sort=["compute", "communication"],
                scale=alt.Scale(range=["#0072B2", "#D55E00"]),
            ),
            order=alt.Order("part:N", sort="descending"),
            tooltip=[
                "link:N",
                "part:N",
                alt.Tooltip("seconds:Q", format=".3f"),
                alt.Tooltip("step_s:Q", title="step (s)", format=".3f"),
            ],
        )
        .properties(
            height=160,
            title=alt.TitleParams(
                title,
                subtitle="orange: all-reduce time left exposed; the bar's length is "
                "the step, so throughput is proportional to 1 / length",
            ),
        )
    )


def contention_chart(
    df: pd.DataFrame,
    drop: float = 0.4,
    title: str = "How much throughput other traffic on the fabric costs",
) -> alt.LayerChart:
    """Throughput drop against the bandwidth taken, one line per network-bound share.

    Args:
        df: ``cl.models.contention.contention_sweep`` output (columns
            ``stolen_pct, drop_pct, network_share``).
        drop: a horizontal rule at this drop (0.4 for the claim of 40%).
    """
    check_columns(df, ["stolen_pct", "drop_pct", "network_share"])
    lines = (
        alt.Chart(df)
        .mark_line()
        .encode(
            x=alt.X("stolen_pct:Q", title="bandwidth taken by other traffic (%)"),
            y=alt.Y("drop_pct:Q", title="training throughput lost (%)"),
            color=alt.Color("network_share:N", title="step network-bound", sort=None),
            tooltip=[
                "network_share",
                alt.Tooltip("stolen_pct:Q", format=".0f"),
                alt.Tooltip("drop_pct:Q", format=".1f"),
            ],
        )
    )
    rule = (
        alt.Chart(pd.DataFrame({"y": [drop * 100]}))
        .mark_rule(strokeDash=[6, 3], color="#000")
        .encode(y="y:Q")
    )
    return alt.layer(lines, rule).properties(
        title=alt.TitleParams(
            title,
            subtitle=f"dashed: a {drop:.0%} drop; only lines that reach it can "
            "explain it, and only above the bandwidth share where they cross",
        )
    )
