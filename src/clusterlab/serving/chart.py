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
#: The disaggregation explorer's control: the prompt's length (log2 tokens).
PROMPT_LOG2 = Range(
    "prompt_log2", min=8, max=15, step=1, default=11, log_base=2,
    label="prompt tokens ",
)  # fmt: skip
#: Tokens each request generates, in the disaggregation explorer.
OUTPUT_TOKENS = 256
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


def allreduce_chart(table: pd.DataFrame) -> alt.LayerChart:
    """All-reduce time against its size: measured points, the fitted alpha-beta
    line, the decoding sizes marked apart from the large messages.

    Args:
        table: ``cl.serving.cluster.allreduce_table`` rows.
    """
    check_columns(table, ["size_bytes", "time_s", "model_time_s", "kind"])
    data = table.assign(time_us=table.time_s * 1e6, model_us=table.model_time_s * 1e6)
    x = alt.X("size_bytes:Q", scale=alt.Scale(type="log", base=2),
              title="bytes all-reduced")  # fmt: skip
    line = (
        alt.Chart(data)
        .mark_line(strokeDash=[6, 3], color="#555555")
        .encode(x=x, y=alt.Y("model_us:Q", scale=alt.Scale(type="log")))
    )
    points = (
        alt.Chart(data)
        .mark_point(filled=True, size=80)
        .encode(
            x=x,
            y=alt.Y("time_us:Q", scale=alt.Scale(type="log"),
                    title="all-reduce time (us)"),
            color=alt.Color("kind:N", title=None, legend=alt.Legend(orient="bottom")),
            shape=alt.Shape("kind:N", legend=None),
            tooltip=["kind", "size_bytes", alt.Tooltip("time_us:Q", format=".1f")],
        )
    )  # fmt: skip
    return alt.layer(line, points).properties(
        title=alt.TitleParams(
            "A decoding all-reduce costs the link's latency, not its bandwidth",
            subtitle="points: two ranks on this machine (fastest of the repeats); "
            "dashed: the alpha-beta line fitted through every size",
        )
    )


def disagg_chart(data: pd.DataFrame, prompt=None, live: bool = False):
    """When disaggregation pays: decode time lost to prefills, against a transfer.

    Co-located, each request's ``OUTPUT_TOKENS`` decoding steps are slowed by
    the other requests' prefills (``cl.models.serving.disagg_latency``):
    ``tokens x step x (1 / (1 - rho) - 1)``, ``rho = rate x prefill``.
    Disaggregated, the request pays its KV transfer once. Where the solid line
    is above a dashed one, shipping the cache over that link costs less.

    Args:
        data: ``cl.models.serving.disagg_sweep`` rows.
        prompt: prompt tokens (default: the control's default).
        live: True for the widget's chart: the parameter is fixed, not bound.
    """
    check_columns(data, ["rate_per_s", "link", "prefill_s_per_token"])
    check_columns(data, ["transfer_alpha_s", "transfer_s_per_token", "decode_step_s"])
    exponent = None if prompt is None else float(np.log2(prompt))
    length = PROMPT_LOG2.param(value=exponent)
    if live:
        length = alt.param(name=PROMPT_LOG2.name, value=length.param.value)
    rho = "datum.rate_per_s * pow(2, prompt_log2) * datum.prefill_s_per_token"
    slowed = (
        f"{rho} < 0.95 ? {OUTPUT_TOKENS} * datum.decode_step_s * 1e3 * "
        f"(1 / (1 - {rho}) - 1) : null"
    )
    transfer = (
        "1e3 * (datum.transfer_alpha_s + pow(2, prompt_log2) * "
        "datum.transfer_s_per_token)"
    )
    x = alt.X("rate_per_s:Q", scale=alt.Scale(type="log"),
              title="requests per second per server")  # fmt: skip
    y = alt.Y("ms:Q", scale=alt.Scale(type="log"),
              title="latency added to one request (ms)")  # fmt: skip
    colocated = (
        alt.Chart(data)
        .transform_filter(f"datum.link == '{data.link.iloc[0]}'")
        .transform_calculate(ms=slowed)
        .transform_filter("isValid(datum.ms) && datum.ms > 0")
        .mark_line(strokeWidth=3, color="#D55E00")
        .encode(x=x, y=y, tooltip=["rate_per_s:Q", alt.Tooltip("ms:Q", format=".2f")])
    )
    shipped = (
        alt.Chart(data)
        .transform_calculate(ms=transfer)
        .mark_line(strokeDash=[6, 3])
        .encode(
            x=x, y=y,
            color=alt.Color("link:N", title="KV transfer over",
                            legend=alt.Legend(orient="bottom")),
            tooltip=["link", alt.Tooltip("ms:Q", format=".2f")],
        )
    )  # fmt: skip
    return (
        alt.layer(colocated, shipped)
        .add_params(length)
        .properties(
            title=alt.TitleParams(
                "Disaggregation pays where prefills slow decoding more than "
                "the KV transfer costs",
                subtitle=f"solid: {OUTPUT_TOKENS} tokens of decoding slowed by "
                "the other requests' prefills (until they fill 95% of the engine); "
                "dashed: one KV transfer",
            ),
            height=260,
        )
    )


__all__ = [
    "PROMPT_LOG2",
    "OUTPUT_TOKENS",
    "allreduce_chart",
    "disagg_chart",
    "BATCHES",
    "batching_chart",
    "CONTEXT_LOG2",
    "SERVED_MODEL",
    "decode_chart",
    "explorer_chart",
    "explorer_data",
]
