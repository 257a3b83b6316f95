"""The serving explorer: a model and a context, decode speed against the batch."""

from __future__ import annotations


def explorer_inputs(gpu: str = "H200 SXM", n_gpus: int = 8, bytes_per_value: int = 2):
    """The explorer's rows: one 8-GPU server of ``gpu`` and the published models.

    Returns:
        ``cl.serving.chart.explorer_data`` rows (bf16 weights and KV cache).
    """
    import pandas as pd

    from clusterlab.core import published
    from clusterlab.models.serving import kv_cache_table
    from clusterlab.serving.chart import explorer_data

    spec = published.row("gpu_specs", part=gpu)
    server = {
        "peak_flops": float(spec["bf16_dense_flops"]) * n_gpus,
        "bandwidth_Bps": float(spec["hbm_bandwidth_Bps"]) * n_gpus,
        "hbm_bytes": float(spec["hbm_bytes"]) * n_gpus,
    }
    kv = kv_cache_table(gpu, n_gpus, bytes_per_value)
    params = published.load("serving_models").set_index("model")["params_total"]
    models = pd.DataFrame(
        {
            "model": kv["model"],
            "weights_bytes": kv["weights_bytes"],
            "kv_bytes_per_token": kv["kv_bytes_per_token"],
            "flops_per_token": [2.0 * params[m] for m in kv["model"]],
        }
    )
    return explorer_data(server, models)


def serving_explorer(data=None):
    """Widget: pick a model and a context; the roofline redraws with the batch.

    Show it with ``cl.show(serving_explorer(), serving_twin())``.
    """
    import ipywidgets as w
    from IPython.display import display

    from clusterlab.serving.chart import CONTEXT_LOG2, SERVED_MODEL, explorer_chart

    data = explorer_inputs() if data is None else data
    model = SERVED_MODEL.widget()
    context = CONTEXT_LOG2.widget(continuous_update=False)
    status = w.HTML()
    out = w.Output()

    def redraw(*_):
        rows = data[data.model == model.value].iloc[0]
        kv = rows.kv_bytes_per_token * context.value
        most = int((rows.hbm_bytes - rows.weights_bytes) // kv)
        status.value = (
            f"{model.value}: {rows.kv_bytes_per_token / 1024:,.0f} KiB of KV cache "
            f"per token; at {context.value:,.0f} tokens a request, at most "
            f"{max(most, 0):,} requests fit beside the weights"
        )
        out.clear_output(wait=True)
        with out:
            display(explorer_chart(data, model.value, context.value, live=True))

    model.observe(redraw, names="value")
    context.observe(redraw, names="value")
    redraw()
    box = w.VBox([w.HBox([model, context]), status, out])
    box.update = redraw
    return box


def serving_twin(data=None):
    """The explorer's static twin: the same chart, its inputs in the page."""
    from clusterlab.serving.chart import explorer_chart

    return explorer_chart(explorer_inputs() if data is None else data)


__all__ = ["explorer_inputs", "serving_explorer", "serving_twin"]
