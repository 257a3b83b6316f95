"""Jobs at scale as pictures: a straggler at the barrier, checkpoints and lost
work, and the decision framework.

``straggler_bars`` draws one step of ``cl.sim.stragglers``: every worker's
compute time and the wait at the all-reduce barrier for the slowest.
``checkpoint_bars`` lays out a run of ``cl.sim.checkpointing`` at the
Young/Daly interval: work, checkpoints, failures, the work they lose, restarts.
``decision_spec`` is the book's framework (rules D1-D4) as boxes and arrows.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from ..._validate import check_int
from ...models.checkpointing import job_mtbf, young_daly_interval
from ...sim import checkpointing, stragglers
from ._base import box_diagram, frame, lane_diagram

__all__ = [
    "checkpoint_bars",
    "checkpoint_timeline_diagram",
    "decision_diagram",
    "decision_spec",
    "straggler_bars",
    "straggler_diagram",
]


def straggler_bars(n_workers: int = 8, slow_factor: float = 1.5, seed: int = 0):
    """One synchronous step: compute bars, then the wait for the slowest worker.

    Args:
        n_workers: workers, in [2, 32]; the last one is slowed by ``slow_factor``.
        seed: the simulation's seed.

    Returns:
        Bars ``lane, start, end, kind, label`` in milliseconds.
    """
    n = check_int("n_workers", n_workers, 2, 32)
    p = stragglers.StragglerParams(
        n_workers=n, n_steps=1, slow_workers=1, slow_factor=slow_factor
    )
    times_ms = stragglers.draw_compute_times(p, seed)[0] * 1e3
    barrier = times_ms.max()
    rows = []
    for w, t in enumerate(times_ms):
        lane = f"worker {w}"
        rows.append(
            dict(lane=lane, start=0.0, end=t, kind="compute", label=f"{t:.0f} ms")
        )
        if t < barrier:
            rows.append(dict(lane=lane, start=t, end=barrier, kind="waiting", label=""))
    return pd.DataFrame(rows)


def straggler_diagram(n_workers: int = 8, slow_factor: float = 1.5, seed: int = 0):
    """The step of :func:`straggler_bars` with the barrier marked."""
    bars = straggler_bars(n_workers, slow_factor, seed)
    barrier = bars["end"].max()
    chart = lane_diagram(
        bars,
        title=f"A step is a maximum: {n_workers} workers wait for the slowest",
        subtitle=f"the barrier (the all-reduce) starts at {barrier:.0f} ms",
        x_title="time in the step (ms)",
        size=(560, 200),
    )
    rule = (
        alt.Chart(pd.DataFrame({"x": [barrier]}))
        .mark_rule(color="black", strokeDash=[4, 3], strokeWidth=2)
        .encode(x="x:Q")
    )
    return alt.layer(chart, rule)


def checkpoint_bars(
    checkpoint_cost_s: float = 600.0,
    part_mtbf_s: float = 5e7,
    n_parts: int = 4096,
    work_s: float = 86400.0,
    seed: int = 1,
) -> pd.DataFrame:
    """A run checkpointing at the Young/Daly interval, as bars in hours.

    Returns:
        Bars ``lane, start, end, kind, label`` with kinds work, checkpoint,
        lost work and restart.
    """
    mtbf_s = job_mtbf(part_mtbf_s, n_parts)
    tau_s = young_daly_interval(checkpoint_cost_s, mtbf_s)
    phases = checkpointing.simulate(
        checkpointing.JobParams(
            work_s=work_s,
            interval_s=tau_s,
            checkpoint_cost_s=checkpoint_cost_s,
            restart_s=checkpoint_cost_s,
            part_mtbf_s=part_mtbf_s,
            n_parts=n_parts,
        ),
        seed,
    )
    kind = phases["phase"].where(phases["kept"], "lost work")
    # A cross marks each failure, at the restart that follows it.
    label = kind.map({"restart": "✕"}).fillna("")
    return pd.DataFrame(
        dict(
            lane="the job",
            start=phases["start_s"] / 3600,
            end=phases["end_s"] / 3600,
            kind=kind,
            label=label,
        )
    )


def checkpoint_timeline_diagram(
    checkpoint_cost_s: float = 600.0, part_mtbf_s: float = 5e7, n_parts: int = 4096
):
    """Work, checkpoints, failures and lost work at the Young/Daly interval."""
    mtbf_s = job_mtbf(part_mtbf_s, n_parts)
    tau_s = young_daly_interval(checkpoint_cost_s, mtbf_s)
    bars = checkpoint_bars(checkpoint_cost_s, part_mtbf_s, n_parts)
    lost = bars[bars["kind"] == "lost work"]
    return lane_diagram(
        bars,
        title="Checkpoints at the Young/Daly interval, and what failures cost",
        subtitle=(
            f"job MTBF {mtbf_s / 3600:.1f} h, checkpoint {checkpoint_cost_s / 60:.0f} "
            f"min, interval sqrt(2 C M) = {tau_s / 3600:.2f} h; {len(lost)} failures "
            f"lose {(lost['end'] - lost['start']).sum():.1f} h of work"
        ),
        x_title="wall-clock time (h)",
        kinds=["work", "checkpoint", "lost work", "restart"],
        size=(600, 50),
    )


def decision_spec() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The framework's questions and answers (rules D1-D4) as boxes and links."""
    q = "question"
    nodes = [
        dict(
            id="work",
            x=30,
            y=0,
            w=40,
            h=7,
            kind=q,
            label="What does the work spend its time on?",
        ),
        dict(
            id="dense",
            x=0,
            y=16,
            w=30,
            h=9,
            kind=q,
            label="dense matrix arithmetic,\nhigh FLOP per byte",
        ),
        dict(
            id="branchy",
            x=35,
            y=16,
            w=30,
            h=9,
            kind=q,
            label="branching logic, small\nrequests, consistency",
        ),
        dict(
            id="io",
            x=70,
            y=16,
            w=30,
            h=9,
            kind=q,
            label="waiting on I/O\nor the network",
        ),
        dict(
            id="fits",
            x=0,
            y=34,
            w=30,
            h=9,
            kind=q,
            label="fits in GPU memory,\nor can be sharded?",
        ),
        dict(
            id="gpu", x=0, y=52, w=30, h=7, kind="GPU cluster", label="D1: GPU cluster"
        ),
        dict(
            id="cpu", x=35, y=52, w=30, h=7, kind="CPUs", label="D2: distributed CPUs"
        ),
        dict(
            id="both",
            x=70,
            y=52,
            w=30,
            h=7,
            kind="both",
            label="D3: both (training with\ndata pipelines)",
        ),
        dict(
            id="hybrid",
            x=20,
            y=66,
            w=60,
            h=7,
            kind="label",
            label="D4: production systems are hybrids",
        ),
    ]
    links = [
        dict(src="work", dst="dense", label=""),
        dict(src="work", dst="branchy", label=""),
        dict(src="work", dst="io", label=""),
        dict(src="dense", dst="fits", label=""),
        dict(src="fits", dst="gpu", label="yes"),
        dict(src="fits", dst="cpu", label="no", straight=True),
        dict(src="branchy", dst="cpu", label=""),
        dict(src="io", dst="cpu", label="", straight=True),
        dict(src="io", dst="both", label="large training"),
        dict(src="gpu", dst="hybrid", label="", straight=True),
        dict(src="cpu", dst="hybrid", label=""),
        dict(src="both", dst="hybrid", label="", straight=True),
    ]
    links = [dict(r, kind="decides") for r in links]
    return frame(nodes, ()), frame(links, ())


def decision_diagram():
    """The decision framework of :func:`decision_spec`."""
    nodes, links = decision_spec()
    return box_diagram(
        nodes,
        links,
        title="Choosing GPUs, CPUs or both",
        subtitle="each question is a number an earlier chapter computes",
        size=(600, 300),
    )
