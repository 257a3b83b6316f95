"""Widget: a published MoE model, tokens per rank, an NVLink domain; the all-to-all."""

from __future__ import annotations

from clusterlab.core.validate import check_choice
from clusterlab.experts.chart import EP_TOKENS, ep_alltoall_chart, ep_model
from clusterlab.models.moe import config_alltoall_sweep


def ep_alltoall_widget(model: str = "DeepSeek-V3"):
    """Menus over the all-to-all cost chart of ``cl.models.moe``.

    Args:
        model: initial model, a ``model`` of ``data/moe_configs.csv``.

    Returns:
        The widget (an ``ipywidgets.VBox``); ``.update()`` redraws it.
    """
    import ipywidgets as w
    from IPython.display import display

    models = ep_model()
    check_choice("model", model, models.options)
    menu = models.widget(value=model)
    tokens = EP_TOKENS.widget()
    domain = w.SelectionSlider(
        options=[4, 8, 16, 36, 72], value=8, description="NVLink GPUs"
    )
    status = w.HTML()
    out = w.Output()

    def update(_=None):
        df = config_alltoall_sweep(
            (menu.value,),
            (tokens.value,),
            ep_values=(2, 4, 8, 16, 32, 64),
            ranks_per_domain=domain.value,
        )
        widest = df.loc[df.ep.idxmax()]
        status.value = (
            f"EP {int(widest.ep)}: {widest.bytes_per_rank / 1e6:,.0f} MB per rank "
            f"each way, {widest.layer_ms:.2f} ms per layer, "
            f"{widest.network_share:.0%} of it over the network"
        )
        out.clear_output(wait=True)
        with out:
            display(ep_alltoall_chart(df, title=f"{menu.value}: all-to-all per layer"))

    for control in (menu, tokens, domain):
        control.observe(update, names="value")
    box = w.VBox([w.HBox([menu, tokens, domain]), status, out])
    box.update = update
    update()
    return box


__all__ = ["ep_alltoall_widget"]
