"""The example's widget: a slider for the workers, the chart redrawn; a static twin."""

from __future__ import annotations


def total_widget(n_workers: int = 4):
    """A live explorer; show it with ``cl.show(widget, static_chart)``."""
    import ipywidgets as w
    from IPython.display import display

    from clusterlab._topic_template.chart import WORKERS, total_chart
    from clusterlab._topic_template.sim import SumParams, simulate

    n = WORKERS.widget(value=n_workers)
    out = w.Output()

    def redraw(*_):
        out.clear_output(wait=True)
        with out:
            display(total_chart(simulate(SumParams(n.value))))

    n.observe(redraw, names="value")
    redraw()
    return w.VBox([n, out])
