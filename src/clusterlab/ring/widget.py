"""Widgets for all-reduce models and interconnects: controls to models to charts."""

from __future__ import annotations

from clusterlab.ring.chart import ALLREDUCE_CONTROLS, allreduce_model_chart


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

    The sliders are built from the specs that build the page's sliders
    (``cl.ring.chart.ALLREDUCE_CONTROLS``), and each redraw is
    ``allreduce_model_chart`` at their values: the page's chart with its
    parameters fixed, so the live and the static explorer draw one model.

    Returns:
        An ``ipywidgets.VBox``; moving a slider redraws the chart.
    """
    import ipywidgets as w

    alpha, bw, size = (spec.widget() for spec in ALLREDUCE_CONTROLS)

    def draw():
        return allreduce_model_chart(
            alpha.value, bw.value, 2**size.value, interactive=False
        )

    out, redraw = _output_with(draw)
    for control in (alpha, bw, size):
        control.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HBox([alpha, bw, size]), out])


__all__ = ["allreduce_algorithm_explorer"]
