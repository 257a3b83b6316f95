"""Charts of number formats: each format's range, and a loss's gradients against it.

The bars span each format from its smallest subnormal to its largest value (in
powers of two); the ticks are the gradients of a loss, times a loss scale. In
the book's page a slider moves the scale without Python; a tick left of the
fp16 bar is a gradient fp16 rounds to zero, right of it one that overflows.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Range
from clusterlab.core.validate import check_int

_RANGE_COLS = ["format", "log2_min_subnormal", "log2_min_normal", "log2_max"]


_HIST_COLS = ["log2_value", "share"]


_GRAD_ROW = "gradients x scale"


# The loss scale's power of two, on the page's slider and the live widget's.
LOSS_SCALE = Range(
    "log2_scale", min=0, max=40, step=1, default=0,
    label="loss scale, power of two ", widget_label="log2 scale",
)  # fmt: skip


def loss_scale_chart(
    ranges: pd.DataFrame,
    gradients: pd.DataFrame,
    *,
    log2_scale: int = 0,
    slider: bool = True,
    max_log2_scale: int = 40,
) -> alt.LayerChart:
    """Formats' ranges as bars; a loss's gradients, times a scale, as ticks.

    Args:
        ranges: ``cl.models.precision.format_ranges()``.
        gradients: ``cl.models.precision.log2_histogram(values)``.
        log2_scale: the loss scale's power of two to start at, in [0, 40].
        slider: give the page a slider for the scale (False: fixed at
            ``log2_scale``, as the widget draws it).
        max_log2_scale: the slider's end, in [1, 40].

    Returns:
        The layered chart: light bars from the smallest subnormal to the
        smallest normal, dark from there to the largest value; ticks sized by
        the share of gradients in each power of two.
    """
    check_columns(ranges, _RANGE_COLS, "ranges")
    check_columns(gradients, _HIST_COLS, "gradients")
    check_int("max_log2_scale", max_log2_scale, 1, LOSS_SCALE.max)
    if not 0 <= log2_scale <= max_log2_scale:
        raise ValueError(
            f"log2_scale={log2_scale!r} is out of range: allowed [0, {max_log2_scale}]"
        )
    order = [*ranges["format"], _GRAD_ROW]
    y = alt.Y("format:N", sort=order, title=None)
    x_title = "value (log2; 0 is 1, 10 is about 1,000)"
    base = alt.Chart(ranges[_RANGE_COLS].round(3))
    sub = base.mark_bar(color="#56B4E9", opacity=0.5).encode(
        x=alt.X("log2_min_subnormal:Q", title=x_title), x2="log2_min_normal:Q", y=y
    )
    normal = base.mark_bar(color="#0072B2").encode(
        x="log2_min_normal:Q", x2="log2_max:Q", y=y,
        tooltip=["format", "log2_min_subnormal", "log2_max"],
    )  # fmt: skip
    if slider:
        scale = LOSS_SCALE.up_to(max_log2_scale).param(value=log2_scale)
        shift = "datum.log2_value + log2_scale"
    else:
        scale, shift = None, f"datum.log2_value + {int(log2_scale)}"
    grads = gradients[_HIST_COLS].round(4).assign(format=_GRAD_ROW)
    ticks = (
        alt.Chart(grads)
        .transform_calculate(shifted=shift)
        .mark_tick(color="#D55E00", thickness=3)
        .encode(
            x="shifted:Q",
            y=y,
            size=alt.Size("share:Q", title="share of gradients", legend=None),
            tooltip=[alt.Tooltip("share:Q", format=".1%")],
        )  # fmt: skip
    )
    if scale is not None:
        ticks = ticks.add_params(scale)
    return alt.layer(sub, normal, ticks).properties(
        width=520,
        height=170,
        title=alt.Title(
            "Where a loss's gradients fall in each format",
            subtitle="bars: each format's range (light: subnormals); ticks: "
            "gradients times the loss scale",
        ),
    )


__all__ = ["loss_scale_chart"]
