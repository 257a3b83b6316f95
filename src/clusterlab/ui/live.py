"""Widgets that show live in a kernel and as a static chart in the book."""

from __future__ import annotations

import html

import altair as alt
import pandas as pd

from .._validate import check_int
from ..perf.collectives import bench_collective
from ..viz.messages import world_size_chart
from ..viz.theme import OFFLINE_RENDERER, chart_bundle

LIVE_NOTE = (
    "Run this lab on Colab or Jupyter to use the live control; below is "
    "the chart of its default settings."
)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def show(widget, static_chart, note: str = LIVE_NOTE) -> None:
    """Display ``widget`` live, with ``static_chart`` as its kernel-free stand-in.

    Both go out in one display bundle. Front ends with a widget manager (Jupyter,
    Colab, VS Code) pick the widget view; the book build drops that type and
    renders the HTML: the note and the static chart. In local Jupyter, where
    charts are sent as Vega rather than HTML, the stand-in would never be shown
    beside the live widget, so only the note goes with it, as plain text.
    """
    from IPython.display import display

    model_id = getattr(widget, "model_id", None) or getattr(widget, "_model_id", None)
    if model_id is None:
        raise ValueError(f"widget={widget!r} is not an ipywidgets widget")
    bundle = {
        WIDGET_VIEW: {"version_major": 2, "version_minor": 0, "model_id": model_id},
        "text/plain": f"{note} (live widget: {type(widget).__name__})",
    }
    local = alt.renderers.active == OFFLINE_RENDERER
    chart = {} if local or static_chart is None else chart_bundle(static_chart)
    if "text/html" in chart:
        bundle["text/html"] = (
            f'<div class="clusterlab-static-twin"><p><em>'
            f"{html.escape(note)}</em></p>{chart['text/html']}</div>"
        )
    display(bundle, raw=True)


def message_size_explorer(defaults: pd.DataFrame, *, max_world_size: int = 4):
    """Widget: pick a world size and a message size, measure an all-reduce.

    Args:
        defaults: measurements to start from, in ``bench_collective``'s columns.
        max_world_size: the largest world size on the slider, in [2, 8].

    Returns:
        The widget (an ``ipywidgets.VBox``); measured points accumulate in its chart.
    """
    import ipywidgets as w
    from IPython.display import display

    check_int("max_world_size", max_world_size, 2, 8)
    state = {"df": defaults.copy()}
    ranks = w.IntSlider(value=2, min=2, max=max_world_size, description="world size")
    log2 = w.IntSlider(value=16, min=2, max=24, description="log2 bytes")
    run = w.Button(description="Measure all-reduce", button_style="primary")
    status = w.HTML()
    out = w.Output()

    def redraw():
        out.clear_output(wait=True)
        with out:
            display(world_size_chart(state["df"]))

    def measure(_):
        run.disabled = True
        status.value = f"measuring {2**log2.value:,} bytes on {ranks.value} ranks..."
        try:
            row = bench_collective("all_reduce", [2**log2.value], ranks.value)
            state["df"] = pd.concat([state["df"], row], ignore_index=True)
            t = row["time_s"].iloc[0]
            status.value = (
                f"{row['size_bytes'].iloc[0]:,} bytes on {ranks.value} "
                f"ranks: {t * 1e6:,.0f} µs per all-reduce"
            )
            redraw()
        except Exception as exc:  # show the error in the widget, keep it usable
            status.value = f"<b>failed:</b> {html.escape(str(exc).splitlines()[0])}"
        finally:
            run.disabled = False

    def announce(_=None):  # a moved slider says what the button will measure
        status.value = (
            f"press the button to measure {2**log2.value:,} bytes on "
            f"{ranks.value} ranks"
        )

    ranks.observe(announce, names="value")
    log2.observe(announce, names="value")
    run.on_click(measure)
    announce()
    redraw()
    return w.VBox([w.HBox([ranks, log2, run]), status, out])
