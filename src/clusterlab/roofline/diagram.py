"""A processor beside its memory, and what a cluster's money buys.

``compute_memory_spec`` draws a CPU core and a GPU as an arithmetic unit fed
by a memory through a pipe, with the peak rate, the bandwidth and the ridge
point ``P / B`` (FLOP per byte) read from ``cpu_core`` and ``gpu_specs``.
``capex_spec`` splits a published cluster cost into its four purchases, each
box as wide as its share.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from clusterlab.core import published
from clusterlab.core.diagram import box_diagram, frame, rate_label, size_label


def flops_label(flop_per_s: float) -> str:
    """``9.894e14`` -> ``"989 TFLOP/s"``."""
    for scale, unit in ((1e15, "PFLOP/s"), (1e12, "TFLOP/s"), (1e9, "GFLOP/s")):
        if flop_per_s >= scale:
            return f"{flop_per_s / scale:.3g} {unit}"
    return f"{flop_per_s:.3g} FLOP/s"


def compute_memory_spec(part: str = "H100 SXM5") -> tuple[pd.DataFrame, pd.DataFrame]:
    """A CPU core and a GPU, each an arithmetic unit fed by its memory.

    Returns:
        ``(nodes, links)``; the ridge point is peak over bandwidth.
    """
    cpu = published.row("cpu_core", item="server_core_assumed")
    gpu = published.row("gpu_specs", part=part)
    machines = [
        ("cpu", "one CPU core", cpu["peak_flops"], cpu["bandwidth_Bps"], None),
        (
            "gpu",
            part,
            gpu["bf16_dense_flops"],
            gpu["hbm_bandwidth_Bps"],
            gpu["hbm_bytes"],
        ),
    ]
    nodes, links = [], []
    for k, (key, name, peak, bw, size) in enumerate(machines):
        x = k * 52
        mem = "memory (its share)" if size is None else f"HBM, {size_label(size)}"
        nodes += [
            dict(
                id=f"{key}_alu",
                x=x,
                y=0,
                w=44,
                h=9,
                kind="arithmetic",
                label=f"{name}: {flops_label(peak)}",
            ),
            dict(id=f"{key}_mem", x=x, y=26, w=44, h=8, kind="memory", label=mem),
            dict(
                id=f"{key}_ridge",
                x=x,
                y=40,
                w=44,
                h=7,
                kind="label",
                label=f"ridge point P/B = {peak / bw:.0f} FLOP/byte",
            ),
        ]
        links.append(
            dict(
                src=f"{key}_mem", dst=f"{key}_alu", kind="memory", label=rate_label(bw)
            )
        )
    return frame(nodes, ()), frame(links, ())


def compute_memory_diagram(part: str = "H100 SXM5") -> alt.LayerChart:
    """The picture of :func:`compute_memory_spec`."""
    nodes, links = compute_memory_spec(part)
    return box_diagram(
        nodes,
        links,
        title="Arithmetic fed by memory: a CPU core and a GPU",
        subtitle="below its ridge point a kernel waits on the memory pipe; "
        "above it, on the arithmetic",
        size=(600, 170),
        legend=True,
    )


__all__ = ["compute_memory_diagram", "compute_memory_spec"]
