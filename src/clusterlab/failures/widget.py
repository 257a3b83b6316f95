"""Widget for failure detection: a heartbeat detector against its timeout.

The goodput calculator of the checkpointing lab is ``cl.checkpointing.widget``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from clusterlab.failures.chart import JITTER_MS, LOSS_PCT, heartbeat_chart
from clusterlab.failures.sim import HeartbeatParams, heartbeat_sweep


def heartbeat_widget(params: HeartbeatParams | None = None, timeouts_s=None):
    """Widget: jitter, loss and heartbeat interval against the timeout.

    Each change re-runs the vectorised simulation (``heartbeat_sweep``) and the
    closed forms for every timeout, and redraws both panels.

    Returns:
        The widget (an ``ipywidgets.VBox``); ``widget.update()`` redraws it.
    """
    import ipywidgets as w
    from IPython.display import display

    p = params or HeartbeatParams()
    timeouts = np.arange(1.0, 4.01, 0.25) if timeouts_s is None else timeouts_s
    jitter = JITTER_MS.widget(value=JITTER_MS.clamp(round(p.jitter_s * 1e3)))
    loss = LOSS_PCT.widget(value=LOSS_PCT.clamp(p.loss * 100))
    interval = w.FloatSlider(
        value=p.interval_s, min=0.2, max=2.0, step=0.1, description="interval (s)"
    )
    out = w.Output()

    def update(_=None):
        q = replace(
            p,
            jitter_s=jitter.value / 1e3,
            loss=loss.value / 100,
            interval_s=interval.value,
        )
        sweep = heartbeat_sweep(
            q, timeouts * q.interval_s, n_heartbeats=20_000, n_crashes=1_000
        )
        chart = heartbeat_chart(sweep)
        out.clear_output(wait=True)
        with out:
            display(chart)
        return chart

    for s in (jitter, loss, interval):
        s.observe(update, names="value")
    box = w.VBox([w.HBox([jitter, loss, interval]), out])
    box.update = update
    update()
    return box


__all__ = ["heartbeat_widget"]
