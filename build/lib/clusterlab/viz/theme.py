"""One look for every chart, and charts that draw offline in the built book.

The theme uses the Okabe–Ito palette (distinguishable with the common forms of
colour blindness), titles on every chart and units on every axis title.

In Jupyter and Colab, Altair's own renderer draws the charts. While the book is
being built, the build sets ``CLUSTERLAB_BOOK_BUILD=1`` and charts are written as
a ``<div>`` plus a call to the ``vegaEmbed`` function that the site serves
from its own ``_static`` folder: no page fetches a script from the network.
"""

from __future__ import annotations

import html
import json
import os
import uuid

import altair as alt

#: Okabe & Ito (2008), "Color Universal Design": safe for colour-blind readers.
PALETTE = [
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#D55E00",
    "#CC79A7",
    "#56B4E9",
    "#F0E442",
    "#000000",
]
THEME = "clusterlab"
BOOK_RENDERER = "clusterlab_book"
BOOK_BUILD_ENV = "CLUSTERLAB_BOOK_BUILD"


def _theme() -> dict:
    return {
        "config": {
            "range": {"category": PALETTE},
            "view": {"continuousWidth": 520, "continuousHeight": 300, "stroke": None},
            "title": {"fontSize": 15, "anchor": "start", "subtitleColor": "#444"},
            "axis": {
                "labelFontSize": 12,
                "titleFontSize": 13,
                "grid": True,
                "gridColor": "#e6e6e6",
            },
            "legend": {"labelFontSize": 12, "titleFontSize": 12},
            "line": {"strokeWidth": 2.5},
            "point": {"size": 60, "filled": True},
        }
    }


def _register_theme() -> None:
    # Altair >= 5.5 has alt.theme; 5.4 (still met on some Colab images) only alt.themes.
    if hasattr(alt, "theme") and hasattr(alt.theme, "register"):
        alt.theme.register(THEME, enable=True)(_theme)
    else:  # pragma: no cover - Altair 5.4
        alt.themes.register(THEME, _theme)
        alt.themes.enable(THEME)


def book_html(spec: dict) -> str:
    """HTML that draws ``spec`` with the site's own ``vegaEmbed`` (no network)."""
    div_id = f"cl-vis-{uuid.uuid4().hex[:12]}"
    title = spec.get("title", "chart")
    if isinstance(title, dict):
        title = title.get("text", "chart")
    if isinstance(title, list):
        title = " ".join(title)
    payload = json.dumps(spec).replace("</", "<\\/")
    return (
        f'<div id="{div_id}" class="clusterlab-chart" role="figure" '
        f'aria-label="{html.escape(str(title))}"></div>\n'
        "<script>(function () {\n"
        f'  var el = document.getElementById("{div_id}");\n'
        '  if (typeof vegaEmbed !== "function") {\n'
        '    el.textContent = "This chart needs the book\'s bundled Vega scripts.";\n'
        "    return;\n  }\n"
        f'  vegaEmbed(el, {payload}, {{"actions": false, "renderer": "svg"}})\n'
        '    .catch(function (err) { el.textContent = "Chart failed: " + err; '
        "console.error(err); });\n"
        "})();</script>"
    )


def _book_renderer(spec: dict, **metadata) -> dict:
    return {"text/html": book_html(spec)}


def use_book_renderer_if_building() -> bool:
    """Switch Altair to the offline book renderer when the book is being built."""
    alt.renderers.register(BOOK_RENDERER, _book_renderer)
    if os.environ.get(BOOK_BUILD_ENV) == "1":
        alt.renderers.enable(BOOK_RENDERER)
        return True
    return False


def chart_html(chart) -> str:
    """The HTML the active renderer produces for ``chart`` (used beside widgets)."""
    bundle = chart._repr_mimebundle_()
    if isinstance(bundle, tuple):
        bundle = bundle[0]
    return bundle.get("text/html", "")


_register_theme()
use_book_renderer_if_building()
