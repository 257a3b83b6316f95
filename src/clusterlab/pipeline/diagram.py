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

from clusterlab.core.diagram import lane_diagram
from clusterlab.models.pipeline import simulate_schedule, simulated_bubble
from clusterlab.models.pipeline_schedules import zero_bubble_schedule

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


__all__ = ["pipeline_bars", "pipeline_schedules_diagram"]
