"""Widget: a model and a GPU count; the price of each TP degree."""

from __future__ import annotations

from clusterlab.core.validate import check_choice
from clusterlab.models.tensor_parallel import TP_MODELS, tp_cost_sweep
from clusterlab.tensor_parallel.chart import TP_MODEL, tp_cost_chart


def tp_cost_widget(model: str = "Llama 2 7B"):
    """A model menu and a global-batch slider over the TP cost chart.

    Args:
        model: initial model, a name from ``cl.models.tensor_parallel.TP_MODELS``.

    Returns:
        The widget (an ``ipywidgets.VBox``); ``.update()`` redraws it.
    """
    import ipywidgets as w
    from IPython.display import display

    check_choice("model", model, TP_MODELS)
    menu = TP_MODEL.widget(value=model)
    batch = w.IntSlider(
        value=512, min=64, max=2048, step=64, description="batch (seqs)"
    )
    status = w.HTML()
    out = w.Output()

    def update(_=None):
        df = tp_cost_sweep(models=(menu.value,), global_batch=batch.value)
        tp8 = df.loc[df.tp == 8, "tp_share"].iloc[0]
        tp16 = df.loc[df.tp == 16, "tp_share"].iloc[0]
        status.value = (
            f"TP all-reduces take {tp8:.0%} of the step at TP 8 "
            f"(inside a node) and {tp16:.0%} at TP 16 (across two)"
        )
        out.clear_output(wait=True)
        with out:
            display(tp_cost_chart(df))

    menu.observe(update, names="value")
    batch.observe(update, names="value")
    box = w.VBox([w.HBox([menu, batch]), status, out])
    box.update = update
    update()
    return box


__all__ = ["tp_cost_widget"]
