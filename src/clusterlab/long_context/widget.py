"""Widget: a model and a degree; which split of a long sequence waits least."""

from __future__ import annotations

from clusterlab.core.validate import check_choice
from clusterlab.long_context.chart import cp_time_chart
from clusterlab.models.long_context import LONG_CONTEXT_MODELS, long_context_time_sweep


def _hidden_from(df, where: str) -> str:
    ring = df[(df.method == "ring attention") & (df["where"] == where)]
    hidden = ring.loc[ring.exposed_share == 0, "seq_len"]
    if len(hidden):
        return f"{hidden.min() // 1024}K tokens"
    return f"beyond {ring.seq_len.max() // 1024}K tokens"


def cp_time_widget(model: str = "Llama 2 7B", degree: int = 8):
    """A model menu and a degree slider over the exposed-communication chart.

    Args:
        model: initial model, a name from ``LONG_CONTEXT_MODELS``.
        degree: initial number of GPUs per sequence (or per layer for TP).

    Returns:
        The widget (an ``ipywidgets.VBox``); ``.update()`` redraws it.
    """
    import ipywidgets as w
    from IPython.display import display

    check_choice("model", model, LONG_CONTEXT_MODELS)
    menu = w.Dropdown(
        options=list(LONG_CONTEXT_MODELS), value=model, description="model"
    )
    slider = w.SelectionSlider(
        options=[2, 4, 8, 16, 32], value=degree, description="GPUs"
    )
    status = w.HTML()
    out = w.Output()

    def update(_=None):
        df = long_context_time_sweep(
            LONG_CONTEXT_MODELS[menu.value], degree=slider.value
        )
        wheres = list(dict.fromkeys(df["where"]))
        status.value = "ring attention hides all of its traffic from " + "; ".join(
            f"{_hidden_from(df, where)} {where}" for where in wheres
        )
        out.clear_output(wait=True)
        with out:
            display(cp_time_chart(df))

    menu.observe(update, names="value")
    slider.observe(update, names="value")
    box = w.VBox([w.HBox([menu, slider]), status, out])
    box.update = update
    update()
    return box


__all__ = ["cp_time_widget"]
