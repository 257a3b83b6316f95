"""Charts of serving on a cluster: the decoding all-reduce against its size, and
when disaggregation pays."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Range

#: The disaggregation explorer's control: the prompt's length (log2 tokens).
PROMPT_LOG2 = Range(
    "prompt_log2", min=8, max=15, step=1, default=11, log_base=2,
    label="prompt tokens ",
)  # fmt: skip
#: Tokens each request generates, in the disaggregation explorer.
OUTPUT_TOKENS = 256


def allreduce_chart(table: pd.DataFrame) -> alt.LayerChart:
    """All-reduce time against its size: measured points, the fitted alpha-beta
    line, the decoding sizes marked apart from the large messages.

    Args:
        table: ``cl.serving_cluster.measure.allreduce_table`` rows.
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
    "OUTPUT_TOKENS",
    "PROMPT_LOG2",
    "allreduce_chart",
    "disagg_chart",
]
