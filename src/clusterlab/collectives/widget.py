"""Live widgets: the busbw model and the roofline explorer.

Each control change recomputes a closed-form model and redraws its chart; no
measurement runs, so an update takes milliseconds. Both widgets expose
``update()`` (through ``widget.update``) so that a test can time one redraw.
"""

from __future__ import annotations

import math

import pandas as pd

from clusterlab.collectives.chart import (
    LOG10_ALPHA,
    LOG10_BETA,
    WORLD_SIZE,
    busbw_model_chart,
)
from clusterlab.core.validate import check_float


def _log_slider(spec, value):
    return spec.widget(
        value=spec.clamp(round(math.log10(value), 2)),
        continuous_update=False,
        style={"description_width": "initial"},
    )


def busbw_explorer(alpha_s: float, beta_Bps: float, measured: pd.DataFrame):
    """Widget: world size, α and β of a ring all-reduce against its busbw.

    Args:
        alpha_s: start-up latency in seconds (> 0), e.g. fitted on this machine.
        beta_Bps: bandwidth in bytes/s (> 0).
        measured: all-reduce measurements with ``size_bytes`` and ``busbw_Bps``.

    Returns:
        An ``ipywidgets.VBox``; its ``update()`` redraws the chart.
    """
    import ipywidgets as w
    from IPython.display import display

    check_float("alpha_s", alpha_s, 0.0, low_inclusive=False)
    check_float("beta_Bps", beta_Bps, 0.0, low_inclusive=False)
    n = WORLD_SIZE.widget()
    log_a = _log_slider(LOG10_ALPHA, alpha_s)
    log_b = _log_slider(LOG10_BETA, beta_Bps)
    out = w.Output()

    def update(*_):
        chart = busbw_model_chart(
            10**log_a.value,
            10**log_b.value,
            measured,
            world_size=n.value,
            interactive=False,
        )
        out.clear_output(wait=True)
        with out:
            display(chart)

    for control in (n, log_a, log_b):
        control.observe(update, names="value")
    update()
    box = w.VBox([w.HBox([n, log_a, log_b]), out])
    box.update = update
    return box


__all__ = ["busbw_explorer"]
