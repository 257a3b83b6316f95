"""Widgets that show live in a kernel and as a static chart in the book."""

from __future__ import annotations

import html

import altair as alt

from clusterlab.core.theme import OFFLINE_RENDERER, chart_bundle

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
