"""One look for every chart, and charts that draw offline in the built book.

The theme uses the Okabe–Ito palette (distinguishable with the common forms of
colour blindness), titles on every chart and units on every axis title.

Where the JavaScript that draws a chart comes from depends on where it is shown:

* while the book is being built (the build sets ``CLUSTERLAB_BOOK_BUILD=1``), a
  chart is a ``<div>`` plus a call to the ``vegaEmbed`` function that the site
  serves from its own ``_static`` folder: no page fetches a script;
* in local Jupyter (JupyterLab, Notebook, VS Code), where a workshop may have no
  network, every chart output carries the Vega bundle of ``vl-convert-python``
  (about 1 MB), which it runs only if the page has no Vega yet, so it draws
  offline even when opened alone;
* on Colab, or where ``vl-convert-python`` is not installed, Altair's own
  renderer draws it (loading Vega from a CDN).
"""

from __future__ import annotations

import functools
import html
import json
import os
import re
import sys
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
OFFLINE_RENDERER = "clusterlab_offline"
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


@functools.lru_cache(maxsize=1)
def _vega_bundle() -> str:
    import vl_convert

    return vl_convert.javascript_bundle()


def book_html(spec: dict, *, bundle: str | None = None) -> str:
    """HTML that draws ``spec`` with a local ``vegaEmbed`` (no network).

    Args:
        spec: a Vega-Lite specification (``chart.to_dict()``).
        bundle: JavaScript defining ``vegaEmbed``, run first if the page lacks it;
            ``None`` relies on the page (the book serves it from ``_static``).
    """
    div_id = f"cl-vis-{uuid.uuid4().hex[:12]}"
    title = spec.get("title", "chart")
    if isinstance(title, dict):
        title = title.get("text", "chart")
    if isinstance(title, list):
        title = " ".join(title)
    payload = json.dumps(spec).replace("</", "<\\/")
    loader = ""
    if bundle:
        # Wrapped in a function so that its top-level names stay private; it
        # publishes window.vegaEmbed itself. Only "</script" could end the
        # element early; "</" elsewhere may sit in a regular expression.
        safe = re.sub(r"</(script)", r"<\\/\1", bundle, flags=re.IGNORECASE)
        loader = (
            '  if (typeof vegaEmbed !== "function") {\n'
            f'    (function () {{ "use strict";\n{safe}\n    }})();\n  }}\n'
        )
    missing = "This chart needs Vega, which this page has not loaded."
    return (
        f'<div id="{div_id}" class="clusterlab-chart" role="figure" '
        f'aria-label="{html.escape(str(title))}"></div>\n'
        "<script>(function () {\n"
        f'  var el = document.getElementById("{div_id}");\n'
        f"{loader}"
        '  if (typeof vegaEmbed !== "function") {\n'
        f'    el.textContent = "{missing}";\n'
        "    return;\n  }\n"
        f'  vegaEmbed(el, {payload}, {{"actions": false, "renderer": "svg"}})\n'
        '    .catch(function (err) { el.textContent = "Chart failed: " + err; '
        "console.error(err); });\n"
        "})();</script>"
    )


def _book_renderer(spec: dict, **metadata) -> dict:
    return {"text/html": book_html(spec)}


def _offline_renderer(spec: dict, **metadata) -> dict:
    return {"text/html": book_html(spec, bundle=_vega_bundle())}


def choose_renderer() -> str:
    """Pick and enable the Altair renderer for where the charts are shown.

    Returns:
        The renderer's name: ``clusterlab_book``, ``clusterlab_offline`` or
        Altair's ``default``.
    """
    alt.renderers.register(BOOK_RENDERER, _book_renderer)
    alt.renderers.register(OFFLINE_RENDERER, _offline_renderer)
    if os.environ.get(BOOK_BUILD_ENV) == "1":
        name = BOOK_RENDERER
    elif "google.colab" in sys.modules:
        name = "default"
    else:
        try:
            import vl_convert  # noqa: F401
        except ImportError:
            name = "default"
        else:
            name = OFFLINE_RENDERER
    alt.renderers.enable(name)
    return name


def chart_html(chart) -> str:
    """The HTML the active renderer produces for ``chart`` (used beside widgets)."""
    bundle = chart._repr_mimebundle_()
    if isinstance(bundle, tuple):
        bundle = bundle[0]
    return bundle.get("text/html", "")


_register_theme()
choose_renderer()
