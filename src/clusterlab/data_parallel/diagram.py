"""Data parallelism as pictures: buckets under the backward pass, ZeRO, FSDP.

``bucket_bars`` lays out DDP's model (``cl.models.data_parallel``): buckets of
gradients become ready during the backward pass, and each one's all-reduce
starts when it is ready and the previous one is done. ``zero_spec`` shows what
each rank holds at each ZeRO stage, with widths in bytes per parameter from
``cl.models.memory``. ``fsdp_bars`` is FSDP's gather, compute, free cycle.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from clusterlab.core import published
from clusterlab.core.diagram import box_diagram, frame, lane_diagram, size_label
from clusterlab.core.validate import check_int
from clusterlab.models.collectives import allreduce_time
from clusterlab.models.memory import model_state_bytes_per_param

NDR = "InfiniBand NDR (one 400 Gb/s port)"


def _ndr():
    alpha_s = published.value("link_assumptions", "alpha_s", link="NDR400 InfiniBand")
    bw = published.value("interconnect_rates", "per_direction_Bps", link=NDR)
    return alpha_s, bw


def bucket_bars(
    buckets: int, backward_s: float = 0.1, grad_bytes: float = 1e9, world_size: int = 8
) -> pd.DataFrame:
    """Backward-pass segments and all-reduce bars of DDP with ``buckets`` buckets.

    The all-reduce runs over one NDR port per GPU (rate and latency from
    ``data/``); times in milliseconds.

    Returns:
        Bars with ``lane, start, end, kind, label`` (ms).
    """
    b = check_int("buckets", buckets, 1, 16)
    alpha_s, bw = _ndr()
    per_s = allreduce_time(grad_bytes / b, world_size, alpha_s, bw)
    rows, end_s = [], 0.0
    for i in range(b):
        ready_s = (i + 1) * backward_s / b
        rows.append(
            dict(
                lane="backward",
                start=i * backward_s / b * 1e3,
                end=ready_s * 1e3,
                kind="backward",
                label=f"b{i}",
            )
        )
        start_s = max(end_s, ready_s)
        end_s = start_s + per_s
        rows.append(
            dict(
                lane="all-reduce",
                start=start_s * 1e3,
                end=end_s * 1e3,
                kind="all-reduce",
                label=f"b{i}",
            )
        )
    return pd.DataFrame(rows)


def bucket_overlap_diagram(
    backward_s: float = 0.1, grad_bytes: float = 1e9, world_size: int = 8
) -> alt.VConcatChart:
    """One bucket against four: the all-reduce hides under the backward pass."""
    charts = []
    for b in (1, 4):
        bars = bucket_bars(b, backward_s, grad_bytes, world_size)
        exposed = bars["end"].max() - backward_s * 1e3
        charts.append(
            lane_diagram(
                bars,
                title=f"{b} bucket{'s' if b > 1 else ''}: "
                f"{exposed:.0f} ms of all-reduce left after the backward pass",
                subtitle=(
                    f"{size_label(grad_bytes)} of gradients, {world_size} GPUs, "
                    "one NDR port each"
                    if b == 1
                    else None
                ),
                x_title="time from the start of the backward pass (ms)",
                size=(560, 70),
            )
        )
    return alt.vconcat(*charts).resolve_scale(x="shared")


STATES = ("weights", "grads", "optimizer")


def zero_spec(dp: int = 4) -> pd.DataFrame:
    """What each of ``dp`` ranks holds at ZeRO stages 0-3, in bytes per parameter.

    A box's width is proportional to its bytes per parameter of the model (from
    ``model_state_bytes_per_param``); a sharded box is ``1/dp`` as wide and
    says which shard it is.

    Returns:
        ``nodes`` for :func:`box_diagram`, with a ``bytes_per_param`` column.
    """
    dp = check_int("dp", dp, 2, 8)
    only = {
        "weights": dict(grad_bytes=0, optimizer_bytes=0),
        "grads": dict(weight_bytes=0, optimizer_bytes=0),
        "optimizer": dict(weight_bytes=0, grad_bytes=0),
    }
    unit = 1.4  # diagram units per byte per parameter
    col_w = model_state_bytes_per_param(0, 1) * unit + 4
    rows = []
    for stage in range(4):
        y = stage * 10
        rows.append(
            dict(
                id=f"stage{stage}",
                x=0,
                y=y,
                w=12,
                h=7,
                kind="label",
                label=f"stage {stage}",
                bytes_per_param=0.0,
            )
        )
        for r in range(dp):
            x = 14 + r * col_w
            for state in STATES:
                per = model_state_bytes_per_param(stage, dp, **only[state])
                full = model_state_bytes_per_param(0, 1, **only[state])
                sharded = per < full
                label = f"{state[0].upper()}{r}" if sharded else state[0].upper()
                label = label if per * unit >= 2.5 else ""
                rows.append(
                    dict(
                        id=f"z{stage}r{r}{state}",
                        x=x,
                        y=y,
                        w=per * unit,
                        h=7,
                        kind=state,
                        label=label,
                        bytes_per_param=per,
                    )
                )
                x += per * unit
    for r in range(dp):
        rows.append(
            dict(
                id=f"rank{r}",
                x=14 + r * col_w,
                y=-8,
                w=col_w - 4,
                h=6,
                kind="label",
                label=f"rank {r}",
                bytes_per_param=0.0,
            )
        )
    df = frame(rows, ())
    df["y"] = df["y"] + 8
    return df


def zero_stages_diagram(dp: int = 4) -> alt.LayerChart:
    """ZeRO stages 0-3 as what each rank holds (see :func:`zero_spec`)."""
    nodes = zero_spec(dp)
    totals = [model_state_bytes_per_param(s, dp) for s in range(4)]
    return box_diagram(
        nodes,
        title=f"ZeRO on {dp} ranks: what each rank holds",
        subtitle="W weights, G gradients, O optimizer state; widths in bytes per "
        "parameter: " + ", ".join(f"stage {s}: {t:g}" for s, t in enumerate(totals)),
        size=(620, 190),
        legend=True,
    )


def fsdp_bars(n_layers: int = 3, gather: float = 1.0, compute: float = 1.5):
    """FSDP's forward: gather a layer's weights, compute, free them.

    The gather of layer ``i + 1`` overlaps the compute of layer ``i``
    (prefetch); a layer's full weights are held from its gather to the end
    of its compute. Times in units of one layer's gather.

    Returns:
        Bars with ``lane, start, end, kind, label``.
    """
    n = check_int("n_layers", n_layers, 1, 8)
    rows, net_free, gpu_free = [], 0.0, 0.0
    for i in range(n):
        g0 = net_free
        g1 = g0 + gather
        c0 = max(g1, gpu_free)
        c1 = c0 + compute
        rows += [
            dict(lane="network", start=g0, end=g1, kind="all-gather", label=f"L{i}"),
            dict(lane="compute", start=c0, end=c1, kind="forward", label=f"L{i}"),
            dict(
                lane=f"L{i} full weights",
                start=g0,
                end=c1,
                kind="held",
                label="held, then freed",
            ),
        ]
        net_free, gpu_free = g1, c1
    return pd.DataFrame(rows)


def fsdp_cycle_diagram(n_layers: int = 3) -> alt.LayerChart:
    """The gather, compute, free cycle of :func:`fsdp_bars`."""
    return lane_diagram(
        fsdp_bars(n_layers),
        title="FSDP forward: all-gather a layer, compute it, free it",
        subtitle="the next layer's gather runs during this layer's compute; "
        "only about two layers' full weights are held at once",
        x_title="time (units of one layer's all-gather)",
        size=(560, 150),
    )


__all__ = [
    "bucket_bars",
    "bucket_overlap_diagram",
    "fsdp_bars",
    "fsdp_cycle_diagram",
    "zero_spec",
    "zero_stages_diagram",
]
