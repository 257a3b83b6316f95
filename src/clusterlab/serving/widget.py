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


def disagg_explorer(data=None):
    """Widget: a prompt length; the rate above which disaggregation pays redraws.

    Show it with ``cl.show(disagg_explorer(), disagg_twin())``.
    """
    import ipywidgets as w
    from IPython.display import display

    from clusterlab.models.serving import disagg_sweep
    from clusterlab.serving.chart import OUTPUT_TOKENS, PROMPT_LOG2, disagg_chart

    data = disagg_sweep() if data is None else data
    prompt = PROMPT_LOG2.widget(continuous_update=False)
    status = w.HTML()
    out = w.Output()

    def redraw(*_):
        p = round(prompt.value)
        rho = data.rate_per_s * p * data.prefill_s_per_token
        slowed = (
            OUTPUT_TOKENS * data.decode_step_s * (1 / (1 - rho.clip(upper=0.99)) - 1)
        )
        shipped = data.transfer_alpha_s + p * data.transfer_s_per_token
        words = []
        for link in data.link.unique():
            pays = data.rate_per_s[(data.link == link) & (slowed > shipped)]
            words.append(f"{link} above {pays.min():.2g}/s" if len(pays) else
                         f"{link}: at no rate drawn")  # fmt: skip
        status.value = f"Prompts of {p:,} tokens: disaggregation pays over " + (
            "; ".join(words)
        )
        out.clear_output(wait=True)
        with out:
            display(disagg_chart(data, p, live=True))

    prompt.observe(redraw, names="value")
    redraw()
    box = w.VBox([prompt, status, out])
    box.update = redraw
    return box


def disagg_twin(data=None):
    """The disaggregation explorer's static twin: the same chart, a page slider."""
    from clusterlab.models.serving import disagg_sweep
    from clusterlab.serving.chart import disagg_chart

    return disagg_chart(disagg_sweep() if data is None else data)


__all__ = [
    "disagg_explorer",
    "disagg_twin",
    "explorer_inputs",
    "serving_explorer",
    "serving_twin",
]
