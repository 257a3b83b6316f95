"""Charts of serving one model: decode speed against the batch, and its explorer."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Choice, Range

#: The explorer's controls: the widget builds its inputs from them, the twin its
#: Vega parameters, so the two cannot drift.
CONTEXT_LOG2 = Range(
    "ctx_log2", min=9, max=17, step=1, default=13, log_base=2,
    label="tokens per request (context) ",
)  # fmt: skip
SERVED_MODEL = Choice(
    "served",
    options=("Llama 3 8B", "Llama 3 70B", "Mixtral 8x7B"),
    default="Llama 3 70B",
    label="model ",
    binding_kind="select",
)
#: Batches the explorer draws, on a log scale.
BATCHES = tuple(int(b) for b in np.unique(np.round(np.logspace(0, 10, 41, base=2))))


def decode_chart(table: pd.DataFrame, title: str | None = None) -> alt.LayerChart:
    """Measured tokens/s against the batch (points), the roofline beside it (line).

    Args:
        table: ``cl.serving.measure.roofline_table`` rows: ``batch, tokens_per_s,
            roofline_tokens_per_s``.
    """
    check_columns(table, ["batch", "tokens_per_s", "roofline_tokens_per_s"])
    long = pd.concat(
        [
            table[["batch"]].assign(series="roofline", tokens_per_s=table[
                "roofline_tokens_per_s"]),
            table[["batch", "tokens_per_s"]].assign(series="measured"),
        ]
    )  # fmt: skip
    x = alt.X("batch:Q", scale=alt.Scale(type="log", base=2), title="batch")
    y = alt.Y("tokens_per_s:Q", scale=alt.Scale(type="log"), title="tokens per second")
    color = alt.Color("series:N", title=None, legend=alt.Legend(orient="bottom"))
    line = (
        alt.Chart(long[long.series == "roofline"])
        .mark_line(strokeDash=[6, 3])
        .encode(x=x, y=y, color=color)
    )
    points = (
        alt.Chart(long[long.series == "measured"])
        .mark_point(filled=True, size=70)
        .encode(x=x, y=y, color=color, tooltip=["batch", "tokens_per_s"])
    )
    return alt.layer(line, points).properties(
        title=alt.TitleParams(
            title or "Decoding speed against the batch, measured and on the roofline",
            subtitle="dashed: the roofline (weights read once per step, 2 FLOPs "
            "per weight per request); points: the engine on this machine",
        )
    )


def batching_chart(table: pd.DataFrame) -> alt.LayerChart:
    """Mean time to first token against the arrival rate: twin lines, engine points."""
    check_columns(table, ["rate_per_s", "policy", "source", "ttft_s"])
    data = table.assign(ttft_ms=table["ttft_s"] * 1e3)
    x = alt.X("rate_per_s:Q", scale=alt.Scale(type="log"), title="requests per second")
    y = alt.Y(
        "ttft_ms:Q", scale=alt.Scale(type="log"), title="time to first token (ms)"
    )
    color = alt.Color("policy:N", title=None, legend=alt.Legend(orient="bottom"))
    twin = (
        alt.Chart(data[data.source == "twin"])
        .mark_line(strokeDash=[6, 3])
        .encode(x=x, y=y, color=color)
    )
    engine = (
        alt.Chart(data[data.source == "engine"])
        .mark_point(filled=True, size=70)
        .encode(x=x, y=y, color=color, tooltip=["policy", "rate_per_s", "ttft_ms"])
    )
    return alt.layer(twin, engine).properties(
        title=alt.TitleParams(
            "Continuous batching answers first: time to first token, twin and engine",
            subtitle="dashed: the SimPy twin with the engine's step cost; points: "
            "the engine serving the same Poisson arrivals",
        )
    )


def explorer_data(gpu: dict, models: pd.DataFrame) -> pd.DataFrame:
    """Rows the explorer draws: one per model and batch, with the roofline's inputs.

    Args:
        gpu: ``peak_flops, bandwidth_Bps, hbm_bytes`` of the server (all GPUs).
        models: ``model, weights_bytes, kv_bytes_per_token, flops_per_token``.
    """
    check_columns(models, ["model", "weights_bytes", "kv_bytes_per_token"])
    check_columns(models, ["flops_per_token"])
    rows = [
        (m.model, b, m.weights_bytes, m.kv_bytes_per_token, m.flops_per_token)
        for m in models.itertuples()
        for b in BATCHES
    ]
    cols = ["model", "batch", "weights_bytes", "kv_bytes_per_token", "flops"]
    df = pd.DataFrame(rows, columns=cols)
    return df.assign(
        **{k: gpu[k] for k in ("peak_flops", "bandwidth_Bps", "hbm_bytes")}
    )


def explorer_chart(
    data: pd.DataFrame, model: str | None = None, context=None, live: bool = False
):
    """Tokens/s of one model against the batch at one context, on the roofline.

    The speed is computed in a Vega expression from the controls' parameters,
    so the same chart is the live widget's (parameters fixed at its values) and
    the page's static twin (parameters bound to inputs). Batches whose KV cache
    no longer fits beside the weights are greyed out.

    Args:
        data: :func:`explorer_data` rows.
        model: the model drawn (default: the control's default).
        context: tokens per request (default: the control's default).
        live: True for the widget's chart: the parameters are fixed, not bound.
    """
    check_columns(data, ["model", "batch", "weights_bytes", "kv_bytes_per_token"])
    exponent = None if context is None else float(np.log2(context))
    served = SERVED_MODEL.param(value=model)
    ctx = CONTEXT_LOG2.param(value=exponent)
    if live:  # the same parameters, unbound: the widget's own inputs drive them
        served = alt.param(name=SERVED_MODEL.name, value=served.param.value)
        ctx = alt.param(name=CONTEXT_LOG2.name, value=ctx.param.value)
    speed = (
        "datum.batch / max((datum.weights_bytes + datum.batch * "
        "datum.kv_bytes_per_token * pow(2, ctx_log2)) / datum.bandwidth_Bps, "
        "datum.batch * datum.flops / datum.peak_flops)"
    )
    fits = (
        "datum.weights_bytes + datum.batch * datum.kv_bytes_per_token * "
        "pow(2, ctx_log2) <= datum.hbm_bytes ? 'fits in memory' : 'does not fit'"
    )
    return (
        alt.Chart(data)
        .transform_filter("datum.model == served")
        .transform_calculate(tokens_per_s=speed, memory=fits)
        .mark_line(point=True)
        .encode(
            x=alt.X("batch:Q", scale=alt.Scale(type="log", base=2), title="batch"),
            y=alt.Y(
                "tokens_per_s:Q", scale=alt.Scale(type="log"),
                title="tokens per second (roofline)",
            ),
            color=alt.Color(
                "memory:N",
                scale=alt.Scale(
                    domain=["fits in memory", "does not fit"],
                    range=["#0072B2", "#BBBBBB"],
                ),
                legend=alt.Legend(orient="bottom", title=None),
            ),
            tooltip=["batch:Q", alt.Tooltip("tokens_per_s:Q", format=",.0f")],
        )
        .add_params(served, ctx)
        .properties(
            title=alt.TitleParams(
                "Decoding on one 8-GPU server: speed rises with the batch "
                "until compute or memory stops it",
                subtitle="the roofline at the chosen context; grey: the KV cache "
                "of that batch does not fit beside the weights",
            ),
            height=260,
        )
    )  # fmt: skip


__all__ = [
    "BATCHES",
    "batching_chart",
    "CONTEXT_LOG2",
    "SERVED_MODEL",
    "decode_chart",
    "explorer_chart",
    "explorer_data",
]
