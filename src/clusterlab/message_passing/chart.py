"""Charts of message cost: measured times, the alpha–beta model, and bandwidth.

Every builder takes a tidy DataFrame in the columns ``bench_collective`` returns
(``op, size_bytes, world_size, time_s, algbw_Bps, busbw_Bps``) and returns an
``alt.Chart``; nothing here measures, prints or models. The alpha–beta line is
``cl.models.messages.alpha_beta_curve``'s DataFrame, and the explorer's line is
the same model written as a Vega expression (``alpha_beta_expr``), which the
tests evaluate in Vega against the Python model.
"""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Range
from clusterlab.models.messages import alpha_beta_curve

SIZE_AXIS = "message size (bytes, log scale)"


TIME_AXIS = "time per message (s, log scale)"


def model_curve(
    alpha_s: float, beta_Bps: float, lo_bytes: float, hi_bytes: float, points: int = 60
) -> pd.DataFrame:
    """``cl.models.messages.alpha_beta_curve``, under its older name."""
    return alpha_beta_curve(alpha_s, beta_Bps, lo_bytes, hi_bytes, points)


def alpha_beta_expr(log_size: str, log_alpha: str, log_beta: str) -> str:
    """Vega expression for ``alpha_beta_time(10**log_size, 10**log_a, 10**log_b)``.

    The arguments are Vega expressions (parameter names or ``datum.<field>``) for
    log10 of the size in bytes, of alpha in seconds and of beta in bytes/s.
    """
    return f"pow(10, {log_alpha}) + pow(10, {log_size}) / pow(10, {log_beta})"


def message_time_chart(
    df: pd.DataFrame,
    model: pd.DataFrame | None = None,
    *,
    alpha_s: float | None = None,
    beta_Bps: float | None = None,
    color: str = "op",
    title: str = "Time per message against message size",
) -> alt.Chart:
    """Measured times (points, log–log), with a model's line if one is given.

    Args:
        df: measured rows, columns ``size_bytes``, ``time_s`` and ``color``.
        model: ``cl.models.messages.alpha_beta_curve``'s rows (``size_bytes``,
            ``time_s``; ``alpha_s`` and ``beta_Bps`` name the fit in the
            subtitle).
        alpha_s, beta_Bps: older form: the fit itself, whose curve is then
            taken from ``alpha_beta_curve`` over the measured sizes.
    """
    check_columns(df, ["size_bytes", "time_s", color])
    if model is None and alpha_s is not None and beta_Bps is not None:
        model = alpha_beta_curve(
            alpha_s, beta_Bps, df["size_bytes"].min(), df["size_bytes"].max()
        )
    if model is not None:
        check_columns(model, ["size_bytes", "time_s"], name="model")
    x = alt.X("size_bytes:Q", scale=alt.Scale(type="log"), title=SIZE_AXIS)
    y = alt.Y("time_s:Q", scale=alt.Scale(type="log"), title=TIME_AXIS)
    points = (
        alt.Chart(df)
        .mark_point()
        .encode(
            x=x,
            y=y,
            color=alt.Color(f"{color}:N", title=color.replace("_", " ")),
            tooltip=[
                alt.Tooltip("size_bytes:Q", title="bytes", format=","),
                alt.Tooltip("time_s:Q", title="seconds", format=".3e"),
                color,
            ],
        )
    )
    chart = points
    if model is not None:
        line = (
            alt.Chart(model[["size_bytes", "time_s"]])
            .mark_line(strokeDash=[6, 3], color="#000")
            .encode(
                x=x,
                y=y,
                tooltip=[alt.Tooltip("time_s:Q", title="model s", format=".3e")],
            )
        )
        chart = alt.layer(line, points)
        subtitle = "dashed: alpha–beta fit"
        if {"alpha_s", "beta_Bps"} <= set(model.columns):
            a, b = float(model["alpha_s"].iloc[0]), float(model["beta_Bps"].iloc[0])
            bw = "∞" if math.isinf(b) else f"{b / 1e9:.2f} GB/s"
            subtitle += f", α = {a * 1e6:.1f} µs, β = {bw}"
        title = alt.TitleParams(title, subtitle=subtitle)
    return chart.properties(title=title)


def bandwidth_chart(
    df: pd.DataFrame,
    *,
    column: str = "algbw_Bps",
    color: str = "op",
    title: str = "Bandwidth against message size",
) -> alt.Chart:
    """Bandwidth in GB/s against size: small messages pay latency, large ones stream."""
    check_columns(df, ["size_bytes", column, color])
    data = df.assign(gbps=df[column] / 1e9)
    label = "bus bandwidth" if column.startswith("busbw") else "bandwidth"
    return (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=alt.X("size_bytes:Q", scale=alt.Scale(type="log"), title=SIZE_AXIS),
            y=alt.Y("gbps:Q", title=f"{label} (GB/s)"),
            color=alt.Color(f"{color}:N", title=color.replace("_", " ")),
            tooltip=[
                alt.Tooltip("size_bytes:Q", title="bytes", format=","),
                alt.Tooltip("gbps:Q", title="GB/s", format=".3f"),
            ],
        )
        .properties(title=title)
    )


# The page's sliders of alpha_beta_explorer (no live widget shares them); a
# fit starts them, so the defaults only fill a gap.
LOG10_ALPHA = Range(
    "log_alpha", min=-7.0, max=-1.0, step=0.05, default=-4.0,
    label="log10 α (α in s) ",
)  # fmt: skip
LOG10_BETA = Range(
    "log_beta", min=6.0, max=12.0, step=0.05, default=9.0,
    label="log10 β (β in bytes/s) ",
)  # fmt: skip


def alpha_beta_explorer(
    df: pd.DataFrame,
    alpha_s: float,
    beta_Bps: float,
    title: str = "Move the sliders: can another α and β fit the points better?",
) -> alt.LayerChart:
    """Measured points and a model line whose α and β are sliders in the page.

    The sliders are Vega-Lite parameters, so they work in the static book
    with no Python kernel behind the page.
    """
    check_columns(df, ["size_bytes", "time_s"])
    lo, hi = float(df["size_bytes"].min()), float(df["size_bytes"].max())
    log_a = math.log10(max(alpha_s, 1e-7))
    log_b = math.log10(beta_Bps) if math.isfinite(beta_Bps) else 12.0
    # a fitted value starts its slider as it is, even beyond the slider's ends
    a = alt.param(
        name=LOG10_ALPHA.name, value=round(log_a, 2), bind=LOG10_ALPHA.binding()
    )
    b = alt.param(
        name=LOG10_BETA.name, value=round(log_b, 2), bind=LOG10_BETA.binding()
    )
    t_lo, t_hi = float(df["time_s"].min()) / 10, float(df["time_s"].max()) * 10
    x = alt.X(
        "size_bytes:Q", scale=alt.Scale(type="log", domain=[lo, hi]), title=SIZE_AXIS
    )
    y = alt.Y(
        "time_s:Q",
        scale=alt.Scale(type="log", domain=[t_lo, t_hi], clamp=True),
        title=TIME_AXIS,
    )
    grid = alt.sequence(math.log10(lo), math.log10(hi) + 0.01, 0.02, as_="log_size")
    line = (
        alt.Chart(grid)
        .transform_calculate(
            size_bytes="pow(10, datum.log_size)",
            time_s=alpha_beta_expr("datum.log_size", "log_alpha", "log_beta"),
        )
        .mark_line(color="#000", strokeDash=[6, 3])
        .encode(x=x, y=y)
    )
    points = (
        alt.Chart(df)
        .mark_point(color="#0072B2")
        .encode(
            x=x,
            y=y,
            tooltip=[
                alt.Tooltip("size_bytes:Q", format=","),
                alt.Tooltip("time_s:Q", format=".3e"),
            ],
        )
    )
    return (
        alt.layer(line, points)
        .add_params(a, b)
        .properties(
            title=alt.TitleParams(
                title,
                subtitle="points: measured here; dashed: "
                "time = α + size / β with the sliders' α and β",
            )
        )
    )


def world_size_chart(
    df: pd.DataFrame, title: str = "All-reduce time for each world size"
) -> alt.LayerChart:
    """Measured times by world size; a radio button in the page picks one to stress.

    Points are single measurements; the line joins each size's median, so a
    size measured twice (say, once more from the live widget) stays one line.
    """
    check_columns(df, ["size_bytes", "time_s", "world_size"])
    sizes = sorted(int(w) for w in df["world_size"].unique())
    pick = alt.selection_point(
        fields=["world_size"],
        value=sizes[0],
        bind=alt.binding_radio(options=sizes, name="world size "),
    )
    x = alt.X("size_bytes:Q", scale=alt.Scale(type="log"), title=SIZE_AXIS)
    color = alt.Color("world_size:N", title="world size (ranks)")
    opacity = alt.condition(pick, alt.value(1.0), alt.value(0.15))
    base = alt.Chart(df)
    line = base.mark_line().encode(
        x=x,
        y=alt.Y("median(time_s):Q", scale=alt.Scale(type="log"), title=TIME_AXIS),
        color=color,
        opacity=opacity,
    )
    points = base.mark_point().encode(
        x=x,
        y=alt.Y("time_s:Q", scale=alt.Scale(type="log"), title=TIME_AXIS),
        color=color,
        opacity=opacity,
        tooltip=[
            "world_size",
            alt.Tooltip("size_bytes:Q", format=","),
            alt.Tooltip("time_s:Q", format=".3e"),
        ],
    )
    return alt.layer(line, points.add_params(pick)).properties(title=title)
