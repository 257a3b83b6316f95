"""One look for every chart, and charts that draw offline wherever they are shown.

The theme uses the Okabe–Ito palette (distinguishable with the common forms of
colour blindness), titles on every chart and units on every axis title.

Where the JavaScript that draws a chart comes from depends on where it is shown:

* while the book is being built (the build sets ``CLUSTERLAB_BOOK_BUILD=1``), a
  chart is a ``<div>`` plus a call to the ``vegaEmbed`` function that the site
  serves from its own ``_static`` folder: no page fetches a script;
* in local Jupyter (JupyterLab, Notebook 7, VS Code), where a workshop may have
  no network, a chart is sent as a Vega specification under the MIME type
  ``application/vnd.vega.v5+json``, which the front end draws with the Vega it
  ships: a few kilobytes per chart, no script in the output. ``vl-convert-python``
  compiles the Vega-Lite of Altair to Vega in the kernel, so the front end's
  older Vega-Lite never reads it;
* on Colab, or where ``vl-convert-python`` is not installed, Altair's own
  renderer draws it (loading Vega from a CDN).

A front end without a Vega renderer (Notebook 6, some viewers) can be given
charts that carry the whole Vega bundle (about 1 MB each) with
``choose_renderer("clusterlab_standalone")`` or ``CLUSTERLAB_RENDERER``.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import math
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


#: Local Jupyter: a Vega spec under ``VEGA_MIME`` (the front end's own Vega draws it).
OFFLINE_RENDERER = "clusterlab_offline"


#: HTML that carries the Vega bundle itself, for front ends without a Vega renderer.
STANDALONE_RENDERER = "clusterlab_standalone"


BOOK_BUILD_ENV = "CLUSTERLAB_BOOK_BUILD"


#: Names a renderer to use instead of the automatic choice.
RENDERER_ENV = "CLUSTERLAB_RENDERER"


#: The MIME type JupyterLab 4 (and Notebook 7, VS Code) draw with their own Vega 5.
VEGA_MIME = "application/vnd.vega.v5+json"


VEGA5_SCHEMA = "https://vega.github.io/schema/vega/v5.json"


#: As in the book: no action menu (its editor link leaves the machine), SVG output.
EMBED_OPTIONS = {"actions": False, "renderer": "svg"}


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
            # Below the plot, in up to three columns: a legend on the right
            # made most charts wider than the book's text column (688 px in a
            # 1280 px window), and the page cut them off.
            # Several legends stack, not side by side.
            "legend": {
                "labelFontSize": 12,
                "titleFontSize": 12,
                "orient": "bottom",
                "columns": 3,
                "layout": {"bottom": {"direction": "vertical", "anchor": "start"}},
            },  # fmt: skip
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

    The chart is a figure named by its description (``describe``); once drawn,
    a page that serves ``clusterlabChartData`` (the book does, from
    ``_ext/static/chart_data.js``) adds the chart's data as tables behind a
    "data" toggle below it, reachable from the keyboard.

    Args:
        spec: a Vega-Lite specification (``chart.to_dict()``).
        bundle: JavaScript defining ``vegaEmbed``, run first if the page lacks it;
            ``None`` relies on the page (the book serves it from ``_static``).
    """
    div_id = f"cl-vis-{uuid.uuid4().hex[:12]}"
    spec = describe(spec)
    title = _title(spec)
    label = html.escape(spec["description"])
    js_title = json.dumps(title).replace("</", "<\\/")
    payload = json.dumps(spec, separators=(",", ":")).replace("</", "<\\/")
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
        f'aria-label="{label}"></div>\n'
        "<script>(function () {\n"
        f'  var el = document.getElementById("{div_id}"), spec = {payload};\n'
        f"{loader}"
        '  if (typeof vegaEmbed !== "function") {\n'
        f'    el.textContent = "{missing}";\n'
        "    return;\n  }\n"
        '  vegaEmbed(el, spec, {"actions": false, "renderer": "svg"})\n'
        "    .then(function () {\n"
        # vega-embed names its container "Vega visualization": name it again.
        '      el.setAttribute("aria-label", spec.description);\n'
        '      if (typeof clusterlabChartData === "function") '
        f"clusterlabChartData(el, spec, {js_title});\n"
        "    })\n"
        '    .catch(function (err) { el.textContent = "Chart failed: " + err; '
        "console.error(err); });\n"
        "})();</script>"
    )


def describe(spec: dict) -> dict:
    """``spec`` with a ``description``: what the chart shows, for screen readers.

    A chart that states its own description keeps it; otherwise it is the
    title and the subtitle, which in this book say what the chart shows and
    what to see in it. Vega names the drawing with it, and the book's figure
    carries it as its label.

    Args:
        spec: a Vega-Lite specification (``chart.to_dict()``); not modified.

    Returns:
        A copy with a non-empty ``description``.
    """
    if str(spec.get("description") or "").strip():
        return spec
    parts = [_title(spec)]
    title = spec.get("title")
    if isinstance(title, dict) and title.get("subtitle"):
        sub = title["subtitle"]
        parts.append(" ".join(map(str, sub)) if isinstance(sub, list) else str(sub))
    text = ". ".join(p.strip().rstrip(".") for p in parts if p and p.strip())
    return {**spec, "description": f"Chart: {text}."}


#: The channel that carries a colour's meaning a second time, by mark type.
SECOND_CHANNEL = {"line": "strokeDash", "trail": "strokeDash", "point": "shape"}


def _mark_type(mark) -> str:
    return mark.get("type", "") if isinstance(mark, dict) else str(mark)


def colour_only_marks(spec) -> list[str]:
    """Marks of ``spec`` (at any depth) whose categories differ by colour alone.

    A line or point mark that colours a nominal or ordinal field must say it a
    second way too, by dash or by shape (WCAG 1.4.1, Use of Color).
    """
    found = []

    def walk(node, path):
        if isinstance(node, dict):
            mark, enc = node.get("mark"), node.get("encoding") or {}
            channel = SECOND_CHANNEL.get(_mark_type(mark)) if mark else None
            colour = enc.get("color") or {}
            if (
                channel
                and not (isinstance(mark, dict) and channel in mark)
                and isinstance(colour, dict)
                and colour.get("field")
                and colour.get("type") in ("nominal", "ordinal")
                and channel not in enc
            ):
                found.append(
                    f"{path or 'spec'}: {_mark_type(mark)} by {colour['field']}"
                )
            for key, value in node.items():
                walk(value, f"{path}.{key}" if path else key)
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}[{i}]")

    walk(spec, "")
    return found


def second_channel(spec):
    """``spec`` with a dash (lines) or a shape (points) for every colour category.

    Each line or point mark that colours a nominal or ordinal field, and has
    no dash or shape of its own, gets one on the same field, with the colour's
    title, order and legend, so that Vega-Lite draws one legend of both and a
    reader who cannot tell the colours apart still tells the lines apart.

    Args:
        spec: a Vega-Lite specification (``chart.to_dict()``); not modified.

    Returns:
        A copy in which ``colour_only_marks`` finds nothing.
    """
    if isinstance(spec, list):
        return [second_channel(v) for v in spec]
    if not isinstance(spec, dict):
        return spec
    out = {k: second_channel(v) for k, v in spec.items()}
    mark, enc = out.get("mark"), out.get("encoding")
    channel = SECOND_CHANNEL.get(_mark_type(mark)) if mark else None
    colour = (enc or {}).get("color")
    if (
        channel
        and not (isinstance(mark, dict) and channel in mark)
        and isinstance(colour, dict)
        and colour.get("field")
        and colour.get("type") in ("nominal", "ordinal")
        and channel not in enc
    ):
        extra = {
            k: colour[k]
            for k in ("field", "type", "title", "sort", "legend")
            if k in colour
        }
        domain = (colour.get("scale") or {}).get("domain")
        if domain is not None:
            extra["scale"] = {"domain": domain}
        out["encoding"] = {**enc, channel: extra}
    return out


def accessible(spec: dict) -> dict:
    """``spec`` named by what it shows (``describe``), with no meaning in colour
    alone (``second_channel``): what every renderer draws."""
    return describe(second_channel(spec))


def _luminance(colour: str) -> float:
    """The relative luminance of ``#rrggbb`` (WCAG 2.1)."""
    rgb = [int(colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    """The WCAG contrast ratio of two ``#rrggbb`` colours, 1 to 21."""
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def blend(colour: str, opacity: float, over: str = "#ffffff") -> str:
    """``colour`` drawn at ``opacity`` over ``over``, as ``#rrggbb``."""
    a = [int(colour.lstrip("#")[i : i + 2], 16) for i in (0, 2, 4)]
    b = [int(over.lstrip("#")[i : i + 2], 16) for i in (0, 2, 4)]
    mixed = [round(opacity * x + (1 - opacity) * y) for x, y in zip(a, b, strict=True)]
    return "#" + "".join(f"{v:02x}" for v in mixed)


#: The two inks of text drawn on a coloured mark.
DARK_INK, LIGHT_INK = "#111111", "#ffffff"


def ink(fill: str) -> str:
    """The ink, dark or white, that reads best on ``fill`` (``#rrggbb``).

    Every colour of ``PALETTE`` gets an ink of contrast 4.5:1 or more (WCAG
    1.4.3; ``tests/unit/test_theme_access.py``).
    """
    return max((DARK_INK, LIGHT_INK), key=lambda c: contrast(c, fill))


def vega_spec(spec: dict) -> dict:
    """Compile a Vega-Lite ``spec`` to the Vega spec a Vega 5 front end draws.

    ``vl-convert-python`` compiles with the Vega-Lite release the spec was
    written for (Altair's), so the result is the one the book draws. The
    compiled spec uses nothing beyond Vega 5, so it is labelled Vega 5 for
    front ends (JupyterLab 4 ships Vega 5), which otherwise warn about the
    version. The embed options travel inside it, in ``usermeta``.

    Args:
        spec: a Vega-Lite specification (``chart.to_dict()``).

    Returns:
        The Vega specification, a dict ready to be sent as JSON.
    """
    import vl_convert

    vega = vl_convert.vegalite_to_vega(spec, vl_version=_vl_version())
    vega["$schema"] = VEGA5_SCHEMA
    usermeta = dict(vega.get("usermeta") or {})
    usermeta["embedOptions"] = {**EMBED_OPTIONS, **usermeta.get("embedOptions", {})}
    vega["usermeta"] = usermeta
    return vega


@functools.lru_cache(maxsize=1)
def _vl_version() -> str | None:
    """The Vega-Lite version Altair writes, if ``vl-convert`` has it, else None."""
    import vl_convert

    wanted = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    return wanted if wanted in vl_convert.get_vegalite_versions() else None


def _title(spec: dict) -> str:
    title = spec.get("title", "chart")
    if isinstance(title, dict):
        title = title.get("text", "chart")
    if isinstance(title, list):
        title = " ".join(map(str, title))
    return str(title)


def lean_spec(spec: dict) -> dict:
    """``spec`` with only the data its chart reads, and no float noise.

    A chart builder hands over a whole DataFrame; the columns that no string of
    the spec names (encodings, transforms, expressions, tooltips) are dropped
    from its datasets, unless a tooltip shows every field. Floats keep 12
    significant digits, which removes the noise of float arithmetic
    (``58.78570000004402`` becomes ``58.7857``) and nothing a chart can show;
    params' values are rounded the same way, so a filter that compares a row
    with a param still matches.

    Args:
        spec: a Vega-Lite specification (``chart.to_dict()``); not modified.

    Returns:
        A copy with smaller datasets.
    """
    spec = _short_params(spec)
    datasets = spec.get("datasets")
    if not datasets:
        return spec
    rest = json.dumps(
        {k: v for k, v in spec.items() if k != "datasets"}, ensure_ascii=False
    )
    names = rest.replace("\\", "")
    prune = '"tooltip": true' not in rest and '"content": "data"' not in rest
    lean = {}
    for key, rows in datasets.items():
        if not rows or not all(isinstance(r, dict) for r in rows):
            lean[key] = rows
            continue
        columns = list(dict.fromkeys(c for r in rows for c in r))
        keep = [c for c in columns if not prune or c in names]
        lean[key] = [{c: _short(r[c]) for c in keep if c in r} for r in rows]
    return {**spec, "datasets": lean}


def _short_params(node):
    """``node`` with every param's value rounded as the data are.

    A chart that filters its rows on ``datum.x == param`` must see the param and
    the data rounded alike: a slider's value of ``31.622776601683796`` matches
    no row rounded to ``31.6227766017``, and the chart draws nothing.
    """
    if isinstance(node, list):
        return [_short_params(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "params" and isinstance(value, list):
            out[key] = [_short_param(p) for p in value]
        elif key == "datasets":
            out[key] = value
        else:
            out[key] = _short_params(value)
    return out


def _short_param(param):
    """One param with its value, and its radio's or menu's options, rounded."""
    if not isinstance(param, dict):
        return param
    out = dict(param)
    if "value" in out:
        out["value"] = _short_deep(out["value"])
    bind = out.get("bind")
    if isinstance(bind, dict) and "options" in bind:
        out["bind"] = {**bind, "options": _short_deep(bind["options"])}
    return out


def _short_deep(value):
    if isinstance(value, dict):
        return {k: _short_deep(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_short_deep(v) for v in value]
    return _short(value)


def _short(value):
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.12g}")
    return value


@functools.lru_cache(maxsize=1)
def _notice_png() -> str:
    """A one-line picture saying where the chart draws, base64 PNG (about 8 KB).

    Sent as each chart's ``image/png``: front ends that draw Vega prefer the
    Vega, viewers that cannot show the notice, and JupyterLab, which copies a
    chart as a PNG into the notebook when it has none (40–150 KB), keeps it.
    """
    import vl_convert

    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" width="360" height="16" '
        'text-rendering="optimizeSpeed"><text x="2" y="12" font-size="11" '
        'font-family="sans-serif" fill="#555">Interactive chart: open this '
        "notebook in JupyterLab to draw it.</text></svg>"
    )
    return base64.b64encode(vl_convert.svg_to_png(svg)).decode()


def _book_renderer(spec: dict, **metadata) -> dict:
    return {"text/html": book_html(lean_spec(accessible(spec)))}


def _offline_renderer(spec: dict, **metadata) -> dict:
    return {
        VEGA_MIME: vega_spec(lean_spec(accessible(spec))),
        "image/png": _notice_png(),
        "text/plain": f"<chart: {_title(spec)}>",
    }


def _standalone_renderer(spec: dict, **metadata) -> dict:
    return {"text/html": book_html(lean_spec(accessible(spec)), bundle=_vega_bundle())}


RENDERERS = {
    BOOK_RENDERER: _book_renderer,
    OFFLINE_RENDERER: _offline_renderer,
    STANDALONE_RENDERER: _standalone_renderer,
}


def choose_renderer(name: str | None = None) -> str:
    """Pick and enable the Altair renderer for where the charts are shown.

    Args:
        name: a renderer to use (one of Altair's or ``RENDERERS``); ``None``
            reads ``CLUSTERLAB_RENDERER`` and, if that is unset, chooses by the
            place: the book build, Colab, or local Jupyter.

    Returns:
        The renderer's name: ``clusterlab_book``, ``clusterlab_offline``,
        ``clusterlab_standalone`` or one of Altair's (``default`` on Colab).
    """
    for key, fn in RENDERERS.items():
        alt.renderers.register(key, fn)
    name = name or os.environ.get(RENDERER_ENV) or _automatic_renderer()
    if name not in alt.renderers.names():
        allowed = ", ".join(sorted(alt.renderers.names()))
        raise ValueError(f"renderer={name!r} is not known; use one of {allowed}")
    alt.renderers.enable(name)
    return name


def _automatic_renderer() -> str:
    if os.environ.get(BOOK_BUILD_ENV) == "1":
        return BOOK_RENDERER
    if "google.colab" in sys.modules:
        return "default"
    try:
        import vl_convert  # noqa: F401
    except ImportError:
        return "default"
    return OFFLINE_RENDERER


def chart_bundle(chart) -> dict:
    """The MIME bundle (type -> content) the active renderer makes for ``chart``."""
    bundle = chart._repr_mimebundle_()
    if isinstance(bundle, tuple):
        bundle = bundle[0]
    return dict(bundle)


def chart_html(chart) -> str:
    """HTML that draws ``chart`` where it is shown.

    The active renderer's HTML where it makes HTML (the book, Colab); where it
    sends a MIME type instead (local Jupyter), HTML that carries its own Vega,
    for a page that is opened on its own.
    """
    bundle = chart_bundle(chart)
    if "text/html" in bundle:
        return bundle["text/html"]
    return book_html(chart.to_dict(), bundle=_vega_bundle())


_register_theme()


choose_renderer()
