"""Sphinx extension: pages that every reader can use (WCAG 2.1 AA).

It mends, at the one place each comes from, what the theme and docutils write
and axe-core finds wrong (``scripts/axe_site.py``, ``tests/test_site.py``):

* the sidebar's expand toggles (pydata-sphinx-theme's ``<summary>`` holding only
  a chevron icon) get a name: "Sections of <page>";
* the search button's and the colour-mode button's names contain their text
  (template overrides in ``_ext/templates/``: the search button without the
  ``aria-label`` that said only "Search" beside the visible "Search Ctrl+K",
  the colour-mode icons without the titles that were read as its text);
* the bibliography's entries (docutils writes ``role="doc-biblioentry"``, a
  deprecated role, inside ``role="list"``) become list items;
* a focused control shows a visible outline (``static/accessible_pages.css``);
* every chart's data can be read as tables behind a "data" toggle below it
  (``static/chart_data.js``, called by each chart once drawn).

Built pages are never edited afterwards: each fix is applied while Sphinx
writes the page.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
CSS = "accessible_pages.css"
CHART_DATA_JS = "chart_data.js"

_BIBLIOENTRY = ' role="doc-biblioentry"'


def name_toggles(html: str) -> str:
    """``html`` of a sidebar with a name on each icon-only ``<summary>``.

    The name is that of the page the toggle opens ("Sections of Lab 01"), read
    from the link just before the ``<details>``; a section caption already in
    the summary is its name, so such a summary is left alone.
    """
    if "<summary>" not in html:
        return html
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for summary in soup.find_all("summary"):
        if summary.get_text(strip=True) or summary.get("aria-label"):
            continue
        item = summary.find_parent("li")
        link = item.find("a", recursive=False) if item else None
        title = link.get_text(" ", strip=True) if link else "this page"
        summary["aria-label"] = f"Sections of {title}"
    return str(soup)


def list_bibliography(body: str) -> str:
    """``body`` with each citation of a ``role="list"`` a list item."""
    return body.replace(_BIBLIOENTRY, ' role="listitem"')


def _page_context(app, pagename, templatename, context, doctree) -> None:
    if "body" in context and _BIBLIOENTRY in context["body"]:
        context["body"] = list_bibliography(context["body"])
    make = context.get("generate_toctree_html")
    if make is None or getattr(make, "_names_toggles", False):
        return

    def generate_toctree_html(*args, **kwargs):
        from markupsafe import Markup

        return Markup(name_toggles(str(make(*args, **kwargs))))

    generate_toctree_html._names_toggles = True
    context["generate_toctree_html"] = generate_toctree_html


def _config_inited(app, config) -> None:
    # Before the theme's own templates, so the override wins.
    config.templates_path.insert(0, str(TEMPLATES))
    config.html_static_path.append(str(HERE / "static"))


def setup(app):
    app.connect("config-inited", _config_inited)
    # After pydata-sphinx-theme has put generate_toctree_html in the context.
    app.connect("html-page-context", _page_context, priority=900)
    app.add_css_file(CSS)
    app.add_js_file(CHART_DATA_JS)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1.0"}
