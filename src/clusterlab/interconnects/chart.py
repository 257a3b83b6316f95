"""Charts of interconnects: a step's time by network, and what contention costs."""

import altair as alt
import numpy as np
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Range

# Tokens per GPU by their log2, on the live calculator's slider and the page's;
# the page's stops at the sweep's ends (Range.within).
LOG2_TOKENS = Range(
    "log2_tok", min=9, max=18, step=1, default=13,
    label="log2 tokens per GPU ", widget_label="log2 tok/GPU",
)  # fmt: skip
# NICs per node: the live slider, and the page's radio of the sweep's counts.
NICS = Range(
    "nics", min=1, max=8, step=1, default=1,
    label="NICs per node ", widget_label="NICs/node",
)  # fmt: skip


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
            tokens per GPU, at least two token counts in 2**9..2**18) that
            filter ``df``; without them ``df`` must hold one case per link.
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
            NICS.points(nics).param(value=nics[0]),
            LOG2_TOKENS.within(toks[0], toks[-1]).param(value=toks[len(toks) // 2]),
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


__all__ = ["contention_chart", "step_time_chart"]
