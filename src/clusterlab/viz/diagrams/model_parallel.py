"""Model parallelism as pictures: tensor and sequence parallelism, pipeline
schedules from the package's schedule simulator, and 3D layouts on nodes.

``pipeline_bars`` turns ``cl.models.pipeline.simulate_schedule`` into lanes (one
per GPU), so the picture is the simulated schedule, not a drawing of it.
``layout_spec`` places each GPU's coordinates (tensor, data, pipeline) on
nodes in Megatron's order: tensor-parallel ranks fastest, so that they share a
node's NVLink.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from ..._validate import check_int
from ...models.pipeline import simulate_schedule, simulated_bubble
from ...models.pipeline_zero_bubble import zero_bubble_schedule
from ._base import box_diagram, frame, lane_diagram

__all__ = [
    "layout_diagram",
    "layout_spec",
    "pipeline_bars",
    "pipeline_schedules_diagram",
    "tensor_parallel_diagram",
    "tensor_parallel_spec",
]

#: (title, schedule, interleave) of each lane picture.
SCHEDULES = (
    ("GPipe", "gpipe", 1),
    ("1F1B", "1f1b", 1),
    ("interleaved 1F1B", "1f1b", 2),
    ("zero bubble (B and W split)", "zero-bubble", 1),
)
PHASES = {"fwd": "forward", "bwd": "backward", "wgt": "weight gradient (W)"}


def simulated(stages, microbatches, schedule, interleave=1):
    """The package's simulated schedule: ``simulate_schedule`` or, for
    "zero-bubble", ``zero_bubble_schedule`` (B and W each half a backward)."""
    if schedule == "zero-bubble":
        return zero_bubble_schedule(stages, microbatches)
    return simulate_schedule(stages, microbatches, schedule, interleave=interleave)


def pipeline_bars(stages=4, microbatches=8, schedule="1f1b", interleave=1):
    """The simulated schedule as bars: one lane per GPU, a bar per op."""
    df = simulated(stages, microbatches, schedule, interleave)
    # Interleaved ops are too short to carry their micro-batch's number.
    label = df["microbatch"].astype(str) if interleave == 1 else ""
    return pd.DataFrame(
        dict(
            lane="GPU " + df["stage"].astype(str),
            start=df["start"],
            end=df["end"],
            kind=df["phase"].map(PHASES),
            label=label,
        )
    )


def pipeline_schedules_diagram(stages: int = 4, microbatches: int = 8):
    """GPipe, 1F1B, interleaved 1F1B and zero bubble as lanes, with their bubbles."""
    charts = []
    for name, schedule, v in SCHEDULES:
        df = simulated(stages, microbatches, schedule, v)
        charts.append(
            lane_diagram(
                pipeline_bars(stages, microbatches, schedule, v),
                title=f"{name}: bubble {simulated_bubble(df):.0%} of each GPU's step",
                x_title="time (units of one stage's forward of one micro-batch)",
                kinds=list(PHASES.values()),
                size=(600, 90),
            )
        )
    return alt.vconcat(*charts).resolve_scale(x="shared")


def tensor_parallel_spec(sequence_parallel: bool = False):
    """An MLP split over 2 GPUs: A by columns, B by rows, f and g between.

    Returns:
        ``(nodes, links)``.
    """
    sp = bool(sequence_parallel)
    enter = "g: all-gather" if sp else "f: identity"
    leave = "g-bar: reduce-scatter" if sp else "g: all-reduce"
    x_in = "X: S/2 tokens" if sp else "X (all tokens)"
    nodes = [
        dict(id="x", x=0, y=14, w=16, h=8, kind="activation", label=x_in),
        dict(id="f", x=20, y=14, w=16, h=8, kind="collective", label=enter),
    ]
    links = [dict(src="x", dst="f", label="")]
    for g in range(2):
        y = g * 28
        nodes += [
            dict(
                id=f"a{g}",
                x=42,
                y=y,
                w=18,
                h=8,
                kind="weights",
                label=f"A{g + 1}: columns {g + 1}/2",
            ),
            dict(
                id=f"y{g}",
                x=64,
                y=y,
                w=14,
                h=8,
                kind="activation",
                label=f"Y{g + 1} =\nGeLU(X A{g + 1})",
            ),
            dict(
                id=f"b{g}",
                x=82,
                y=y,
                w=16,
                h=8,
                kind="weights",
                label=f"B{g + 1}: rows {g + 1}/2",
            ),
            dict(
                id=f"z{g}",
                x=102,
                y=y,
                w=14,
                h=8,
                kind="activation",
                label=f"Z{g + 1} (partial)",
            ),
        ]
        links += [
            dict(src="f", dst=f"a{g}", label=f"GPU {g}"),
            dict(src=f"a{g}", dst=f"y{g}", label=""),
            dict(src=f"y{g}", dst=f"b{g}", label=""),
            dict(src=f"b{g}", dst=f"z{g}", label=""),
            dict(src=f"z{g}", dst="g", label=""),
        ]
    out = "Z: S/2 tokens" if sp else "Z = Z1 + Z2"
    nodes += [
        dict(id="g", x=120, y=14, w=18, h=8, kind="collective", label=leave),
        dict(id="z", x=142, y=14, w=16, h=8, kind="activation", label=out),
    ]
    links.append(dict(src="g", dst="z", label=""))
    links = [dict(r, kind="data") for r in links]
    return frame(nodes, ()), frame(links, ())


def tensor_parallel_diagram(sequence_parallel: bool = False):
    """Megatron's MLP on 2 GPUs (see :func:`tensor_parallel_spec`)."""
    nodes, links = tensor_parallel_spec(sequence_parallel)
    sub = (
        "sequence parallel: outside the MLP each GPU keeps half the tokens; "
        "the all-reduce becomes an all-gather and a reduce-scatter"
        if sequence_parallel
        else "no communication inside the MLP; one all-reduce (g) forward, "
        "one (f) backward"
    )
    return box_diagram(
        nodes,
        links,
        title="Tensor parallelism: column split, then row split",
        subtitle=sub,
        size=(640, 150),
        font_size=9,
        legend=True,
    )


def layout_spec(
    tp: int = 4, pp: int = 2, dp: int = 2, gpus_per_node: int = 8, cp: int = 1
):
    """GPUs on nodes, each labelled with its (tensor, context, data, pipeline) ranks.

    Global rank ``g = t + tp * (c + cp * (d + dp * p))``: tensor ranks fastest,
    then context, data and pipeline, as Megatron-LM orders them by default
    ("tp-cp-ep-dp-pp"; expert parallelism reuses the data ranks).

    Returns:
        ``nodes`` with ``tp_rank, cp_rank, dp_rank, pp_rank`` columns.
    """
    tp, pp, dp, cp = (
        check_int(n, v, 1, 16)
        for n, v in (("tp", tp), ("pp", pp), ("dp", dp), ("cp", cp))
    )
    per = check_int("gpus_per_node", gpus_per_node, 1, 16)
    world = tp * cp * pp * dp
    if world % per:
        raise ValueError(
            f"tp*cp*pp*dp = {world} must be a multiple of gpus_per_node={per}"
        )
    if world > 64:
        raise ValueError(f"tp*cp*pp*dp = {world} GPUs is too many to draw (<= 64)")
    rows = [
        dict(
            id="fabric",
            x=0,
            y=0,
            w=(per * 9 + 2) * (world // per) - 2,
            h=5,
            kind="fabric",
            label="leaf switches (one rail per GPU index)",
            tp_rank=-1,
            cp_rank=-1,
            dp_rank=-1,
            pp_rank=-1,
        )
    ]
    for k in range(world // per):
        x0 = k * (per * 9 + 2)
        rows.append(
            dict(
                id=f"node{k}",
                x=x0,
                y=9,
                w=per * 9,
                h=24,
                kind="node",
                label="",
                tp_rank=-1,
                cp_rank=-1,
                dp_rank=-1,
                pp_rank=-1,
            )
        )
        rows.append(
            dict(
                id=f"node{k}name",
                x=x0 + 1,
                y=25,
                w=per * 9 - 2,
                h=6,
                kind="node",
                label=f"node {k} (NVLink inside)",
                tp_rank=-1,
                cp_rank=-1,
                dp_rank=-1,
                pp_rank=-1,
            )
        )
    for g in range(world):
        t, c = g % tp, (g // tp) % cp
        d, p = (g // (tp * cp)) % dp, g // (tp * cp * dp)
        k, i = divmod(g, per)
        rows.append(
            dict(
                id=f"gpu{g}",
                x=k * (per * 9 + 2) + i * 9 + 0.5,
                y=11,
                w=8,
                h=12,
                kind=f"pipeline stage {p}",
                label=f"t{t}\nc{c}\nd{d}" if cp > 1 else f"t{t}\nd{d}",
                tp_rank=t,
                cp_rank=c,
                dp_rank=d,
                pp_rank=p,
            )
        )
    return frame(rows, ())


def layout_diagram(
    tp: int = 4, pp: int = 2, dp: int = 2, gpus_per_node: int = 8, cp: int = 1
):
    """The layout of :func:`layout_spec` as a picture."""
    nodes = layout_spec(tp, pp, dp, gpus_per_node, cp)
    n_nodes = tp * cp * pp * dp // gpus_per_node
    ctx = f", CP={cp}" if cp > 1 else ""
    return box_diagram(
        nodes,
        title=f"TP={tp}{ctx}, DP={dp}, PP={pp} on {n_nodes} nodes",
        subtitle="t: tensor rank (inside a node, on NVLink), "
        + ("c: context rank, " if cp > 1 else "")
        + "d: data rank; colour: pipeline stage (its sends cross the fabric)",
        size=(620, 130),
        font_size=9,
        legend=True,
    )
