"""The disaggregation explorer: a prompt length; where shipping the cache pays."""

from __future__ import annotations


def disagg_explorer(data=None):
    """Widget: a prompt length; the rate above which disaggregation pays redraws.

    Show it with ``cl.show(disagg_explorer(), disagg_twin())``.
    """
    import ipywidgets as w
    from IPython.display import display

    from clusterlab.models.serving import disagg_sweep
    from clusterlab.serving_cluster.chart import (
        OUTPUT_TOKENS,
        PROMPT_LOG2,
        disagg_chart,
    )

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
    from clusterlab.serving_cluster.chart import disagg_chart

    return disagg_chart(disagg_sweep() if data is None else data)


__all__ = ["disagg_explorer", "disagg_twin"]
