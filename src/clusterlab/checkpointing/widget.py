"""Widget for checkpointing: GPUs, MTBF, checkpoint and restart cost -> goodput."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from clusterlab.checkpointing.chart import (
    CHECKPOINT_S,
    GPU_MTBF_H,
    LOG2_GPUS,
    RESTART_S,
    goodput_chart,
)
from clusterlab.checkpointing.sim import JobParams, goodput_sweep
from clusterlab.core.units import HOUR_S
from clusterlab.models.checkpointing import daly_interval, young_daly_interval


def goodput_widget(params: JobParams | None = None):
    """Widget: GPUs, GPU MTBF, checkpoint and restart cost -> goodput.

    Each change simulates the job at 40 intervals (``goodput_sweep``), draws
    Daly's closed form beside it and marks the Young and Daly intervals.

    Returns:
        The widget (an ``ipywidgets.VBox``); ``widget.update()`` redraws it.
    """
    import ipywidgets as w
    from IPython.display import display

    p = params or JobParams()
    gpus = LOG2_GPUS.widget(value=LOG2_GPUS.clamp(int(np.log2(p.n_parts))))
    mtbf = GPU_MTBF_H.widget(value=GPU_MTBF_H.clamp(round(p.part_mtbf_s / HOUR_S)))
    cost = CHECKPOINT_S.widget(value=CHECKPOINT_S.clamp(round(p.checkpoint_cost_s)))
    restart = RESTART_S.widget(value=RESTART_S.clamp(round(p.restart_s)))
    status = w.HTML()
    out = w.Output()

    def update(_=None):
        q = replace(
            p,
            n_parts=2**gpus.value,
            part_mtbf_s=mtbf.value * HOUR_S,
            checkpoint_cost_s=float(cost.value),
            restart_s=float(restart.value),
        )
        m = q.job_mtbf_s
        young = young_daly_interval(q.checkpoint_cost_s, m)
        taus = np.geomspace(young / 8, young * 8, 40)
        sweep = goodput_sweep(q, taus, n_failures=20_000)
        best = sweep.loc[sweep["goodput"].idxmax()]
        status.value = (
            f"job MTBF {m / HOUR_S:.2f} h; Young {young:,.0f} s; simulated best "
            f"{best['interval_s']:,.0f} s with goodput {best['goodput']:.3f}"
        )
        chart = goodput_chart(
            sweep, young_s=young, daly_s=daly_interval(q.checkpoint_cost_s, m)
        )
        out.clear_output(wait=True)
        with out:
            display(chart)
        return chart

    for s in (gpus, mtbf, cost, restart):
        s.observe(update, names="value")
    box = w.VBox([w.HBox([gpus, mtbf]), w.HBox([cost, restart]), status, out])
    box.update = update
    update()
    return box


__all__ = ["goodput_widget"]
