"""Charts of cluster hardware: link rates and collective bandwidth.

Builders take tidy DataFrames (measurements from ``cl.core.bench`` or published
tables from ``cl.published.load``) and return Altair charts. Charts meant for
the static book carry Vega-Lite parameters bound to sliders or radio buttons,
so they stay interactive without a kernel; the ring all-reduce's time is
written once as a Vega expression (``ring_expr``), which the all-reduce
explorer of the ring topic uses too. Nothing here measures or prints.
"""

from __future__ import annotations

import math
import re

import altair as alt
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Choice, Range

SIZE_AXIS = "message size (bytes, log scale)"


BUSBW_AXIS = "bus bandwidth (GB/s, log scale)"


_ATOM = re.compile(r"[\w.]+(\([^()]*\))?")


def vega_operand(expr: str) -> str:
    """``expr`` as one operand: a name, a number or a call stays; the rest gets
    parentheses (``2 / n`` with ``n = "a / b"`` must divide by ``a / b``)."""
    return expr if _ATOM.fullmatch(expr) else f"({expr})"


def ring_expr(size: str, n: str, alpha: str, bw: str) -> str:
    """Vega expression for the ring all-reduce: ``2(n-1) α + 2(n-1)/n · S/B``.

    The arguments are Vega expressions (parameter names, ``datum.<field>``,
    numbers or sums) for the size in bytes, the ranks, α in seconds and B in
    bytes/s.
    """
    size, n, alpha, bw = map(vega_operand, (size, n, alpha, bw))
    return f"(2 * ({n} - 1) * {alpha} + 2 * ({n} - 1) / {n} * {size} / {bw})"


def busbw_vs_published_chart(
    measured: pd.DataFrame,
    published: pd.DataFrame,
    title: str = "This machine's collectives beside published GPU all-reduce",
) -> alt.LayerChart:
    """Measured bus bandwidth per op and published all-reduce curves, log–log.

    Args:
        measured: ``op, size_bytes, busbw_Bps`` (``cl.core.bench.bench_collective``).
        published: ``cl.models.allreduce_sweeps.busbw_size_sweep`` output: the
            published points and the size-aware curve between them (rows of
            the raw published table are drawn as points only).
    """
    check_columns(measured, ["op", "size_bytes", "busbw_Bps"])
    if "kind" not in published.columns:  # the raw table: its sized rows, as points
        check_columns(published, ["system", "size_bytes", "busbw_Bps"])
        published = published.dropna(subset=["size_bytes"])
        published = published.assign(label=published["system"], kind="published")
    check_columns(published, ["label", "kind", "size_bytes", "busbw_Bps"])
    here = measured.assign(busbw_GBps=measured["busbw_Bps"] / 1e9)
    pub = published.assign(busbw_GBps=published["busbw_Bps"] / 1e9)
    x = alt.X("size_bytes:Q", scale=alt.Scale(type="log"), title=SIZE_AXIS)
    y = alt.Y("busbw_GBps:Q", scale=alt.Scale(type="log"), title=BUSBW_AXIS)
    tip = [
        alt.Tooltip("size_bytes:Q", format=","),
        alt.Tooltip("busbw_GBps:Q", title="GB/s", format=".3g"),
    ]
    lines = (
        alt.Chart(here)
        .mark_line(point=True)
        .encode(x=x, y=y, color=alt.Color("op:N", title="measured here"), tooltip=tip)
    )
    curves = (
        alt.Chart(pub[pub["kind"] == "interpolated"])
        .mark_line(strokeDash=[4, 3], color="#000")
        .encode(x=x, y=y, detail="label:N", tooltip=["label:N", *tip])
    )
    points = (
        alt.Chart(pub[pub["kind"] == "published"])
        .mark_point(shape="diamond", size=60, filled=True, color="#000")
        .encode(x=x, y=y, tooltip=["label:N", *tip])
    )
    return alt.layer(lines, curves, points).properties(
        title=alt.TitleParams(
            title,
            subtitle="coloured: busbw measured on this machine; black diamonds: "
            "published GPU all-reduce, dashed: interpolated in log size",
        )
    )


def busbw_size_chart(
    df: pd.DataFrame,
    title: str = "Published all-reduce bus bandwidth depends on message size",
) -> alt.LayerChart:
    """Busbw against size per published system; rules at each link's rate.

    Click a legend entry to pick one system. Works without a kernel.

    Args:
        df: ``cl.models.allreduce_sweeps.busbw_size_sweep`` output.
    """
    cols = ["label", "kind", "size_bytes", "busbw_Bps", "link_per_direction_Bps"]
    check_columns(df, cols)
    data = df.assign(
        busbw_GBps=df["busbw_Bps"] / 1e9, link_GBps=df["link_per_direction_Bps"] / 1e9
    )
    pick = alt.selection_point(fields=["label"], bind="legend")
    x = alt.X("size_bytes:Q", scale=alt.Scale(type="log"), title=SIZE_AXIS)
    y = alt.Y("busbw_GBps:Q", title="bus bandwidth (GB/s)")
    legend = alt.Legend(orient="bottom", labelLimit=420, columns=1)
    colour = alt.Color("label:N", title="system", legend=legend)
    fade = alt.condition(pick, alt.value(1.0), alt.value(0.15))
    tip = [
        "label:N",
        "kind:N",
        alt.Tooltip("size_bytes:Q", format=","),
        alt.Tooltip("busbw_GBps:Q", title="GB/s", format=".1f"),
    ]
    base = alt.Chart(data)
    curve = (
        base.transform_filter("datum.kind == 'interpolated'")
        .mark_line()
        .encode(x=x, y=y, color=colour, opacity=fade, tooltip=tip)
    )
    # The line's dash shares the colour's legend; each system's points also
    # differ in shape, without a third legend of the same systems.
    dash = alt.StrokeDash("label:N", title="system", legend=legend)
    shape = alt.Shape("label:N", legend=None)
    curve = curve.encode(strokeDash=dash)
    points = (
        base.transform_filter("datum.kind == 'published'")
        .mark_point(filled=True, size=50)
        .encode(x=x, y=y, color=colour, shape=shape, opacity=fade, tooltip=tip)
    )
    rules = (
        alt.Chart(data.drop_duplicates("link_GBps"))
        .mark_rule(strokeDash=[6, 3], color="#555")
        .encode(y="link_GBps:Q", tooltip=[alt.Tooltip("link_GBps:Q", title="link")])
    )
    return (
        alt.layer(curve, points, rules)
        .add_params(pick)
        .properties(
            height=300,
            title=alt.TitleParams(
                title,
                subtitle=[
                    "points: published; lines: interpolated in log size; grey dashes:",
                    "the link's per-direction rate. Above it only in-switch reduction "
                    "(NVLS) can go.",
                ],
            ),
        )
    )


# The busbw model's controls, in the page (busbw_model_chart) and in the live
# widget (cl.collectives.widget.busbw_explorer). α and β move by their log10:
# a fitted value starts each slider, so the defaults only fill a gap.
WORLD_SIZE = Range("n", min=2, max=64, step=1, default=2, label="world size n ")
LOG10_ALPHA = Range(
    "log_a", min=-7.0, max=-2.0, step=0.05, default=-4.0, label="log10 α (s) "
)
LOG10_BETA = Range(
    "log_b", min=8.0, max=12.0, step=0.05, default=10.0, label="log10 β (B/s) "
)
BUSBW_CONTROLS = (WORLD_SIZE, LOG10_ALPHA, LOG10_BETA)


def busbw_model_chart(
    alpha_s: float,
    beta_Bps: float,
    measured: pd.DataFrame | None = None,
    world_size: int = 2,
    interactive: bool = True,
    title: str = "Ring all-reduce: bus bandwidth grows with message size",
) -> alt.LayerChart:
    """The ring all-reduce's busbw under alpha–beta, with optional measured points.

    ``t = 2(n−1)·α + 2(n−1)/n · S/β`` and ``busbw = 2(n−1)/n · S / t``. With
    ``interactive`` the world size, α and β are sliders in the page.
    """

    def bound(spec, value):  # a fixed value for the live widget, a control in the page
        bind = {"bind": spec.binding()} if interactive else {}
        return alt.param(name=spec.name, value=value, **bind)

    n = bound(WORLD_SIZE, world_size)
    la = bound(LOG10_ALPHA, round(math.log10(alpha_s), 2))
    lb = bound(LOG10_BETA, round(math.log10(beta_Bps), 2))
    x = alt.X(
        "size_bytes:Q", scale=alt.Scale(type="log", domain=[16, 2**34]), title=SIZE_AXIS
    )
    y = alt.Y(
        "busbw_GBps:Q",
        scale=alt.Scale(type="log", domain=[1e-6, 1e3], clamp=True),
        title=BUSBW_AXIS,
    )
    grid = alt.sequence(1.2, 10.3, 0.05, as_="log_s")
    line = (
        alt.Chart(grid)
        .transform_calculate(
            size_bytes="pow(10, datum.log_s)",
            t=ring_expr(
                "pow(10, datum.log_s)", "n", "pow(10, log_a)", "pow(10, log_b)"
            ),
            busbw_GBps="2 * (n - 1) / n * pow(10, datum.log_s) / datum.t / 1e9",
        )
        .mark_line(color="#000", strokeDash=[6, 3])
        .encode(x=x, y=y)
    )
    ceiling = (
        alt.Chart(pd.DataFrame({"k": [0]}))
        .transform_calculate(busbw_GBps="pow(10, log_b) / 1e9")
        .mark_rule(color="#D55E00")
        .encode(y=y)
    )
    layers = [line, ceiling]
    if measured is not None:
        check_columns(measured, ["size_bytes", "busbw_Bps"])
        pts = measured.assign(busbw_GBps=measured["busbw_Bps"] / 1e9)
        layers.append(
            alt.Chart(pts)
            .mark_point(color="#0072B2")
            .encode(
                x=x,
                y=y,
                tooltip=[
                    alt.Tooltip("size_bytes:Q", format=","),
                    alt.Tooltip("busbw_GBps:Q", title="GB/s", format=".3f"),
                ],
            )
        )
    sub = "dashed: model busbw; red rule: β, the ceiling; points: measured here"
    return (
        alt.layer(*layers)
        .add_params(n, la, lb)
        .properties(title=alt.TitleParams(title, subtitle=sub))
    )


def link_rates_chart(
    rates: pd.DataFrame, title: str = "Link rates, per direction or both together"
) -> alt.Chart:
    """Bars of each link's rate; a radio button switches per-direction/both counts."""
    check_columns(rates, ["link", "scope", "per_direction_Bps", "both_directions_Bps"])
    data = rates[["link", "scope", "per_direction_Bps", "both_directions_Bps"]]
    pick = Choice(
        "count", options=("per direction", "both directions"),
        default="per direction", label="count ",
    ).param()  # fmt: skip
    return (
        alt.Chart(data)
        .transform_calculate(
            rate_GBps="(count == 'per direction' ? datum.per_direction_Bps"
            " : datum.both_directions_Bps) / 1e9",
            base_GBps="5",  # a log axis has no zero: bars start at its left edge
        )
        .mark_bar()
        .encode(
            y=alt.Y("link:N", sort="-x", title=None, axis=alt.Axis(labelLimit=280)),
            x=alt.X(
                "rate_GBps:Q",
                scale=alt.Scale(type="log", domain=[5, 2000]),
                title="rate (GB/s, log scale)",
            ),
            x2="base_GBps:Q",
            color=alt.Color(
                "scope:N",
                title="where the link sits",
                legend=alt.Legend(orient="bottom", columns=1, labelLimit=320),
            ),
            tooltip=["link", "scope", alt.Tooltip("rate_GBps:Q", format=".1f")],
        )
        .add_params(pick)
        .properties(
            title=alt.TitleParams(
                title,
                subtitle=[
                    "vendors often quote both directions added together;",
                    "a transfer one way sees the per-direction rate",
                ],
            ),
            height=240,
            width=340,
        )
    )


def published_busbw_chart(
    published: pd.DataFrame,
    title: str = "Published all-reduce bus bandwidth against the link rate",
) -> alt.LayerChart:
    """Bars of published busbw per row, ticks at each link's per-direction rate.

    Args:
        published: rows with ``label, busbw_Bps, link_per_direction_Bps,
            source`` (e.g. ``cl.models.allreduce_sweeps.largest_size_points()``).
    """
    if "label" not in published.columns and "system" in published.columns:
        published = published.assign(label=published["system"])
    check_columns(published, ["label", "busbw_Bps", "link_per_direction_Bps"])
    check_columns(published, ["source"])
    data = published.assign(
        busbw_GBps=published["busbw_Bps"] / 1e9,
        link_GBps=published["link_per_direction_Bps"] / 1e9,
        share=published["busbw_Bps"] / published["link_per_direction_Bps"],
    )[["label", "busbw_GBps", "link_GBps", "share", "source"]]
    y = alt.Y("label:N", title=None, sort=None, axis=alt.Axis(labelLimit=300))
    bars = (
        alt.Chart(data)
        .mark_bar(color="#0072B2")
        .encode(
            y=y,
            x=alt.X("busbw_GBps:Q", title="bus bandwidth (GB/s)"),
            tooltip=[
                "label",
                alt.Tooltip("busbw_GBps:Q", format=".0f"),
                alt.Tooltip("share:Q", title="of link", format=".0%"),
                "source",
            ],
        )
    )
    ticks = (
        alt.Chart(data)
        .mark_tick(color="#D55E00", thickness=3, size=14)
        .encode(y=y, x="link_GBps:Q")
    )
    return alt.layer(bars, ticks).properties(
        title=alt.TitleParams(
            title,
            subtitle="bars: published busbw at the largest published size; orange "
            "ticks: the per-direction rate of the link it is compared with",
        ),
        height=alt.Step(16),
        width=400,
    )


__all__ = [
    "busbw_model_chart",
    "busbw_size_chart",
    "busbw_vs_published_chart",
    "link_rates_chart",
    "published_busbw_chart",
    "ring_expr",
    "vega_operand",
]
