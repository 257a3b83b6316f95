"""Live widgets: the busbw model and the roofline explorer.

Each control change recomputes a closed-form model and redraws its chart; no
measurement runs, so an update takes milliseconds. Both widgets expose
``update()`` (through ``widget.update``) so that a test can time one redraw.
"""

from __future__ import annotations

import math

import pandas as pd

from .._validate import check_float
from ..viz.hardware import busbw_model_chart
from ..viz.roofline import roofline_chart

__all__ = ["busbw_explorer", "roofline_explorer"]


def _log_slider(w, value, lo, hi, description):
    return w.FloatSlider(
        value=round(math.log10(value), 2),
        min=lo,
        max=hi,
        step=0.05,
        description=description,
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
    n = w.IntSlider(value=2, min=2, max=64, description="world size n")
    log_a = _log_slider(w, alpha_s, -7, -2, "log10 α (s)")
    log_b = _log_slider(w, beta_Bps, 8, 12, "log10 β (B/s)")
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


def roofline_explorer(machines: pd.DataFrame, workloads: pd.DataFrame):
    """Widget: design a machine with two sliders and see where work lands.

    Args:
        machines: ``machine, peak_flops, bandwidth_Bps`` rows to draw as given.
        workloads: ``workload, intensity_flop_per_byte`` rows to place.

    Returns:
        An ``ipywidgets.VBox``; its ``update()`` redraws the chart.
    """
    import ipywidgets as w
    from IPython.display import display

    peak = w.FloatSlider(
        value=12.0, min=9, max=16, step=0.1, description="log10 peak FLOP/s"
    )
    bw = w.FloatSlider(
        value=11.0, min=9, max=13, step=0.1, description="log10 bandwidth B/s"
    )
    for s in (peak, bw):
        s.continuous_update = False
        s.style = {"description_width": "initial"}
    status = w.HTML()
    out = w.Output()

    def update(*_):
        mine = pd.DataFrame(
            {
                "machine": ["your design"],
                "peak_flops": [10**peak.value],
                "bandwidth_Bps": [10**bw.value],
            }
        )
        both = pd.concat([mine, machines], ignore_index=True)
        ridge = 10**peak.value / 10**bw.value
        status.value = (
            f"your design's ridge: {ridge:,.1f} FLOP/byte; below it a kernel "
            "waits on memory"
        )
        out.clear_output(wait=True)
        with out:
            display(roofline_chart(both, workloads, selected="your design"))

    peak.observe(update, names="value")
    bw.observe(update, names="value")
    update()
    box = w.VBox([w.HBox([peak, bw]), status, out])
    box.update = update
    return box
