"""Widget for fault tolerance: MTBF, checkpoint, restart and recovery -> goodput."""

from __future__ import annotations

import numpy as np

from clusterlab.core.units import HOUR_S
from clusterlab.fault_tolerance.chart import (
    EXPLORER_CONTROLS,
    LOG2_GPUS_RANGE,
    goodput_chart,
)
from clusterlab.models.fault_tolerance import goodput_table


def goodput_explorer_widget(recovery_s: float | None = None):
    """Live sliders for the goodput explorer; its static twin is
    ``cl.fault_tolerance.chart.goodput_explorer()``.

    Args:
        recovery_s: where the recovery slider starts, e.g. the measured one.

    Returns:
        The widget (an ``ipywidgets.VBox``); ``widget.update()`` redraws it.
    """
    import ipywidgets as w
    from IPython.display import display

    mtbf, cost, restart, recovery, groups = (c.widget() for c in EXPLORER_CONTROLS)
    if recovery_s is not None:
        recovery.value = EXPLORER_CONTROLS[3].clamp(round(recovery_s))
    status = w.HTML()
    out = w.Output()
    lo, hi = LOG2_GPUS_RANGE

    def update(_=None):
        table = goodput_table(
            np.arange(lo, hi + 1),
            gpu_mtbf_s=mtbf.value * HOUR_S,
            checkpoint_cost_s=float(cost.value),
            restart_s=float(restart.value),
            recovery_s=float(recovery.value),
            n_groups=int(groups.value),
        )
        big = table[table["log2_gpus"] == hi].set_index("method")["goodput"]
        status.value = (
            f"at {2**hi:,} GPUs: checkpoint-restart {big['checkpoint-restart']:.3f}, "
            f"per-step recovery {big['per-step recovery']:.3f}"
        )
        chart = goodput_chart(table)
        out.clear_output(wait=True)
        with out:
            display(chart)
        return chart

    for s in (mtbf, cost, restart, recovery, groups):
        s.observe(update, names="value")
    box = w.VBox(
        [w.HBox([mtbf, cost, restart]), w.HBox([recovery, groups]), status, out]
    )
    box.update = update
    update()
    return box


__all__ = ["goodput_explorer_widget"]
