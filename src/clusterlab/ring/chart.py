"""Charts for networks and collectives: all-reduce algorithms, ring timings, steps.

Builders take tidy DataFrames (made by ``models.allreduce_sweeps``,
``models.interconnects``, ``models.contention`` or a measurement) and return
Altair charts. Charts with controls work in the built book without a kernel:
``allreduce_model_chart`` computes the closed-form all-reduce times of
``cl.models.collectives.allreduce_time`` in Vega expressions from its sliders
(``ring_expr`` of the collectives topic, ``tree_expr``, ``hierarchical_expr``,
which the tests evaluate in Vega against the Python model); the others filter
a precomputed sweep with Vega-Lite parameters. Nothing here measures or prints.
"""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

from clusterlab.collectives.chart import ring_expr, vega_operand
from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Range
from clusterlab.models.collectives import ALGORITHMS
from clusterlab.models.links import LINKS

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


# The all-reduce explorer's controls, in the page (allreduce_model_chart) and in
# the live widget (cl.ring.widget.allreduce_algorithm_explorer). The sliders
# move exponents; both start on the ring lab's worked case: α = 10 µs, one 100 GbE
# port per GPU, a 256 MiB message.
LOG10_ALPHA = Range(
    "log_alpha", min=-7.0, max=-3.0, step=0.25, default=-5.0,
    label="log10 α per step (s) ", widget_label="α (s)", log_base=10,
)  # fmt: skip
LOG10_BANDWIDTH = Range(
    "log_bw", min=8.0, max=12.0, step=0.1,
    default=math.log10(LINKS["100GbE TCP"].per_direction_Bps),
    label="log10 network B/s per GPU ", widget_label="B (B/s)", log_base=10,
)  # fmt: skip
LOG2_BYTES = Range(
    "log2_bytes", min=10, max=36, step=1, default=28,
    label="log2 message bytes ", widget_label="log2 bytes",
)  # fmt: skip
ALLREDUCE_CONTROLS = (LOG10_ALPHA, LOG10_BANDWIDTH, LOG2_BYTES)

#: The explorer's GPU counts: every power of two from 2**1 to 2**12.
LOG2_GPUS = (1, 12)


def tree_expr(size: str, n: str, alpha: str, bw: str) -> str:
    """Vega expression for the tree all-reduce: ``2 ⌈log2 n⌉ α + 2(n-1)/n · S/B``.

    Vega has no ``log2``: ``log(n) / LN2`` may land a hair above a whole number
    for a power of two, and ``ceil`` would then count one round too many, so
    the expression takes ``1e-9`` off first (far less than the gap between
    ``log2 n`` and a whole number for any other whole ``n`` up to 10**7).
    """
    size, n, alpha, bw = map(vega_operand, (size, n, alpha, bw))
    rounds = f"({n} > 1 ? ceil(log({n}) / LN2 - 1e-9) : 0)"
    return f"(2 * {rounds} * {alpha} + 2 * ({n} - 1) / {n} * {size} / {bw})"


def hierarchical_expr(
    size: str, n: str, alpha: str, bw: str, g: str, intra_alpha: str, intra_bw: str
) -> str:
    """Vega expression for the hierarchical all-reduce over nodes of ``g`` GPUs.

    A ring inside each node over its fast link, then (with more than one node)
    a ring of each GPU's ``1/g`` share across the ``n / g`` nodes.
    """
    inside = ring_expr(size, g, intra_alpha, intra_bw)
    across = ring_expr(f"{size} / {g}", f"{n} / {g}", alpha, bw)
    return f"({inside} + ({n} / {g} > 1 ? {across} : 0))"


def _readout() -> str:
    """Vega expression for the sliders' values in units a reader knows."""
    unit = "['KiB', 'MiB', 'GiB', 'TiB'][floor(log2_bytes / 10) - 1]"
    return (
        "'α = ' + format(pow(10, log_alpha) * 1e6, '.3~r') + ' µs per step · '"
        " + format(pow(10, log_bw) / 1e9, '.3~r') + ' GB/s per GPU · '"
        " + format(pow(2, log2_bytes % 10), 'd') + ' ' + " + unit
    )


def allreduce_model_chart(
    alpha_s: float | None = None,
    bandwidth_Bps: float | None = None,
    nbytes: float | None = None,
    interactive: bool = True,
    gpus_per_node: int = 8,
    intra: str = "NVLink 4",
    title: str = "Ring, tree and hierarchical all-reduce as the cluster grows",
) -> alt.LayerChart:
    """Time against GPU count of each all-reduce algorithm, computed in the page.

    The times are ``cl.models.collectives.allreduce_time`` written as Vega
    expressions over every power of two from 2 to 4096 GPUs; the hierarchical
    one uses nodes of ``min(n, gpus_per_node)`` GPUs joined by ``intra``, as
    ``cl.models.allreduce_sweeps.allreduce_model_sweep`` does. With
    ``interactive`` α, B and the size are sliders in the page (the specs
    ``LOG10_ALPHA``, ``LOG10_BANDWIDTH``, ``LOG2_BYTES``); without, the chart
    draws the values given (the live widget's).

    Args:
        alpha_s: latency per step between nodes, seconds (default: the spec's).
        bandwidth_Bps: network bytes/s per GPU and direction (default: the
            spec's, one 100 GbE port).
        nbytes: message size in bytes (default: 2**28; the slider moves its
            log2).
        interactive: bind the parameters to sliders in the page.
        gpus_per_node: GPUs per node for the hierarchical line, a power of two.
        intra: the link inside a node (a name in ``cl.models.links.LINKS``).

    Returns:
        An ``alt.LayerChart`` with no table: its rows are made in the page
        (one empty row feeds the readout of the sliders' values).
    """
    if intra not in LINKS:
        raise ValueError(f"intra={intra!r} must be one of {sorted(LINKS)}")
    g = int(gpus_per_node)
    if g < 1 or g & (g - 1):
        raise ValueError(f"gpus_per_node={gpus_per_node!r} must be a power of two")
    values = {}  # each spec's exponent, moved into its slider's range
    for arg, spec, value, log in (
        ("alpha_s", LOG10_ALPHA, alpha_s, math.log10),
        ("bandwidth_Bps", LOG10_BANDWIDTH, bandwidth_Bps, math.log10),
        ("nbytes", LOG2_BYTES, nbytes, math.log2),
    ):
        if value is None:
            values[spec] = spec.default
            continue
        if isinstance(value, bool) or not (
            isinstance(value, int | float) and 0 < value < math.inf
        ):
            raise ValueError(f"{arg}={value!r} must be a finite number > 0")
        values[spec] = min(max(log(value), spec.min), spec.max)
    if interactive:
        params = [spec.param(value=v) for spec, v in values.items()]
    else:
        params = [alt.param(name=spec.name, value=v) for spec, v in values.items()]
    fast = LINKS[intra]
    size, n = "pow(2, log2_bytes)", "datum.gpus"
    alpha, bw = "pow(10, log_alpha)", "pow(10, log_bw)"
    lo, hi = LOG2_GPUS
    x = alt.X(
        "gpus:Q",
        scale=alt.Scale(type="log", base=2, domain=[2**lo, 2**hi]),
        axis=alt.Axis(values=[2**lo, *(2**k for k in range(hi, lo, -2))]),
        title="GPUs (log scale)",
    )
    lines = (
        alt.Chart(alt.sequence(lo, hi + 1, 1, as_="log2_gpus"))
        .transform_calculate(gpus="pow(2, datum.log2_gpus)")
        .transform_calculate(
            ring=ring_expr(size, n, alpha, bw),
            tree=tree_expr(size, n, alpha, bw),
            hierarchical=hierarchical_expr(
                size,
                n,
                alpha,
                bw,
                f"min({n}, {g})",
                repr(fast.alpha_s),
                repr(fast.effective_Bps),
            ),
        )
        .transform_fold(list(ALGORITHMS), as_=["algorithm", "time_s"])
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y("time_s:Q", scale=alt.Scale(type="log"), title=_TIME_LOG),
            color=alt.Color(
                "algorithm:N",
                title="algorithm",
                scale=alt.Scale(domain=list(ALGORITHMS)),
            ),
            tooltip=[
                "algorithm:N",
                "gpus:Q",
                alt.Tooltip("time_s:Q", title="seconds", format=".3e"),
            ],
        )
    )
    readout = (
        alt.Chart(alt.InlineData(values=[{}]))
        .transform_calculate(text=_readout())
        .mark_text(align="left", baseline="top", x=6, y=6, fontSize=12)
        .encode(text="text:N")
    )
    return (
        alt.layer(lines, readout)
        .add_params(*params)
        .properties(
            title=alt.TitleParams(
                title,
                subtitle=[
                    "Small messages: latency steps decide (the ring's 2(n − 1) "
                    "grow with the GPU count).",
                    "Large ones: bandwidth decides; the hierarchical one sends "
                    "most of its bytes over NVLink.",
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


__all__ = [
    "ALLREDUCE_CONTROLS",
    "LOG10_ALPHA",
    "LOG10_BANDWIDTH",
    "LOG2_BYTES",
    "allreduce_algorithms_chart",
    "allreduce_model_chart",
    "hierarchical_expr",
    "ring_expr",
    "ring_timing_chart",
    "tree_expr",
]
