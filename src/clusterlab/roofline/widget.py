"""Live widget: the roofline explorer (workloads against two roofs)."""

import pandas as pd

from clusterlab.roofline.chart import roofline_chart


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


__all__ = ["roofline_explorer"]
