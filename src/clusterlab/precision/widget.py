"""Widget: pick a loss scale; see which gradients fp16 and bf16 keep."""

from __future__ import annotations

from clusterlab.core.validate import check_int
from clusterlab.models.precision import format_ranges, log2_histogram, underflow_share
from clusterlab.precision.chart import LOSS_SCALE, loss_scale_chart


def loss_scale_widget(gradients, log2_scale: int = 0):
    """A slider for the loss scale over the gradients-against-formats chart.

    Args:
        gradients: array-like of fp32 gradient values (unscaled).
        log2_scale: the initial scale's power of two, in [0, 40].

    Returns:
        The widget (an ``ipywidgets.VBox``); ``.update()`` redraws it.
    """
    import ipywidgets as w
    import numpy as np
    from IPython.display import display

    check_int("log2_scale", log2_scale, LOSS_SCALE.min, LOSS_SCALE.max)
    values = np.asarray(gradients, dtype=np.float64)
    ranges, hist = format_ranges(), log2_histogram(values)
    top = float(2.0 ** ranges.set_index("format").at["fp16", "log2_max"])
    slider = LOSS_SCALE.widget(value=log2_scale)
    status = w.HTML()
    out = w.Output()

    def update(_=None):
        s = 2.0**slider.value
        lost = {f: underflow_share(values, f, s) for f in ("fp16", "bf16")}
        over = float((np.abs(values) * s > top).mean())
        status.value = (
            f"scale 2^{slider.value}: fp16 rounds {lost['fp16']:.1%} of the "
            f"gradients to zero and overflows on {over:.1%}; bf16 loses "
            f"{lost['bf16']:.1%}"
        )
        out.clear_output(wait=True)
        with out:
            display(loss_scale_chart(ranges, hist, log2_scale=slider.value,
                                     slider=False))  # fmt: skip

    slider.observe(update, names="value")
    box = w.VBox([slider, status, out])
    box.update = update
    update()
    return box


__all__ = ["loss_scale_widget"]
