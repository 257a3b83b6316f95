"""Sphinx extension: serve every script the book's pages need from the site itself.

* Vega, Vega-Lite and Vega-Embed come from the bundle that the installed
  ``vl-convert-python`` package ships (one classic script defining the globals
  ``vega``, ``vegaLite`` and ``vegaEmbed``, so pages work from ``file://`` too).
* MathJax 3 comes from the installed ``django-static-mathjax`` package.
* sphinx-thebe (which jupyter-book always loads) is kept from adding its
  scripts, which point at a CDN.

Nothing is downloaded and nothing third-party is committed: the files are
written into the build folder at each build. The extension also sets
``CLUSTERLAB_BOOK_BUILD=1``, which the executing kernels inherit, so that
``clusterlab.core.theme`` renders charts for these local scripts instead of a CDN.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

VEGA_BUNDLE = "vendor/vega-bundle.js"
MATHJAX_DIR = "vendor/mathjax"


def _write_vega(dest: Path) -> None:
    import vl_convert

    bundle = vl_convert.javascript_bundle()
    if "window.vegaEmbed" not in bundle:  # the contract this extension relies on
        raise RuntimeError("vl_convert.javascript_bundle() no longer defines vegaEmbed")
    dest.parent.mkdir(parents=True, exist_ok=True)
    # The bundle is written as an ES module; wrapped in a strict function it runs
    # as a classic script (so file:// pages work) and its top-level names (such as
    # ``_``) stay out of the page's global scope, where Sphinx's own scripts live.
    dest.write_text(
        f'(function () {{\n"use strict";\n{bundle}\n}})();\n', encoding="utf-8"
    )


def _copy_mathjax(dest: Path) -> None:
    import mathjax

    es5 = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    shutil.copy2(es5 / "tex-mml-chtml.js", dest / "tex-mml-chtml.js")
    shutil.copytree(
        es5 / "output" / "chtml" / "fonts" / "woff-v2",
        dest / "output" / "chtml" / "fonts" / "woff-v2",
    )
    # Extensions that TeX input may load on demand (\require, and those the
    # combined component does not contain).
    shutil.copytree(
        es5 / "input" / "tex" / "extensions", dest / "input" / "tex" / "extensions"
    )


def _drop_thebe(app) -> None:
    """Remove sphinx-thebe's page scripts: the book runs code on Colab, not Binder,
    and they would put a CDN address (thebe on unpkg) into every page."""
    for listener in list(app.events.listeners.get("env-before-read-docs", [])):
        if getattr(listener.handler, "__qualname__", "") == "init_thebe_core":
            app.disconnect(listener.id)


def _builder_inited(app) -> None:
    os.environ["CLUSTERLAB_BOOK_BUILD"] = "1"
    _drop_thebe(app)
    if app.builder.format != "html":
        return
    root = Path(app.doctreedir).parent / "_offline_static"
    _write_vega(root / VEGA_BUNDLE)
    _copy_mathjax(root / MATHJAX_DIR)
    app.config.html_static_path.append(str(root))
    # Before everything else (myst-nb's scripts come at the default priority 500).
    app.add_js_file(VEGA_BUNDLE, priority=200)


def setup(app):
    app.connect("builder-inited", _builder_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1.0"}
