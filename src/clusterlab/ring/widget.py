"""Widgets for all-reduce models and interconnects: controls to models to charts."""

from __future__ import annotations

from clusterlab.models.allreduce_sweeps import allreduce_model_sweep
from clusterlab.models.links import LINKS
from clusterlab.ring.chart import allreduce_algorithms_chart


def _output_with(draw):
    """An Output area and a function that redraws it from the controls."""
    import ipywidgets as w
    from IPython.display import display

    out = w.Output()

    def redraw(_=None):
        out.clear_output(wait=True)
        with out:
            display(draw())

    return out, redraw


def allreduce_algorithm_explorer():
    """Widget: latency, bandwidth and size sliders over the three models.

    Returns:
        An ``ipywidgets.VBox``; moving a slider redraws the chart.
    """
    import ipywidgets as w

    start = LINKS["100GbE TCP"]  # start from one 100 GbE port per GPU
    alpha = w.FloatLogSlider(
        value=start.alpha_s, base=10, min=-7, max=-3, step=0.25, description="α (s)"
    )
    bw = w.FloatLogSlider(
        value=start.per_direction_Bps,
        base=10,
        min=8,
        max=12,
        step=0.1,
        description="B (B/s)",
    )
    size = w.IntSlider(value=28, min=10, max=36, description="log2 bytes")

    def draw():
        df = allreduce_model_sweep(
            alphas_s=(alpha.value,),
            bandwidths_Bps=(bw.value,),
            log2_sizes=(size.value,),
        )
        return allreduce_algorithms_chart(df)

    out, redraw = _output_with(draw)
    for control in (alpha, bw, size):
        control.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HBox([alpha, bw, size]), out])


__all__ = ["allreduce_algorithm_explorer"]
