"""Every chart of the built book is at most 50 KB, as its page holds it.

``scripts/measure_pages.py`` finds each chart the book build writes into a page
(a ``cl-vis`` ``<div>`` and the script that calls the site's ``vegaEmbed``, plain
in a cell's output or JSON-escaped in widget state) and measures its bytes. The
book test runs it on the whole built site; the unit tests feed it fake pages
with a chart over the limit and expect it to be reported.
"""

from __future__ import annotations

import json

import pytest

from book_helpers import script_module
from clusterlab.core import theme

LIMIT_BYTES = 50_000


measure_pages = script_module("measure_pages")


def _fake_chart_html(n_rows: int) -> str:
    """A chart as the book build writes it, with ``n_rows`` rows of data."""
    rows = [{"x": i, "label": f"row {i:06d} of the fake sweep"} for i in range(n_rows)]
    spec = {"mark": "point", "data": {"values": rows}, "title": "fake"}
    return theme.book_html(spec)


def _page(*bodies: str) -> str:
    return "<html><body><p>Text.</p>" + "".join(bodies) + "</body></html>"


def test_measure_pages_fails_when_a_chart_is_60_kb(tmp_path):
    big = _fake_chart_html(1_400)
    small = _fake_chart_html(10)
    assert 60_000 <= len(big.encode()) < 70_000
    site = tmp_path / "html"
    (site / "book").mkdir(parents=True)
    (site / "book" / "big.html").write_text(_page(small, big), encoding="utf-8")
    (site / "intro.html").write_text(_page(small), encoding="utf-8")
    report = measure_pages.site_charts(site)
    assert [len(report[p]) for p in ("book/big", "intro")] == [2, 1]
    over = measure_pages.too_big(report, LIMIT_BYTES)
    assert [(page, c["bytes"]) for page, c in over] == [("book/big", len(big.encode()))]


def test_measure_pages_fails_when_a_widget_chart_is_60_kb():
    # In a widget's Output the chart sits JSON-escaped in the page's widget state.
    big = _fake_chart_html(1_400)
    state = json.dumps({"outputs": [{"data": {"text/html": big}}]})
    state = state.replace("</", "<\\/")
    found = measure_pages.page_charts(_page(f'<script type="x">{state}</script>'))
    assert len(found) == 1 and found[0]["escaped"]
    assert found[0]["bytes"] > LIMIT_BYTES


def test_measure_pages_fails_when_a_chart_has_no_end():
    cut = _fake_chart_html(5).rsplit("})();", 1)[0]
    with pytest.raises(ValueError, match="no closing script"):
        measure_pages.page_charts(_page(cut))


@pytest.mark.book
def test_no_chart_of_the_built_book_is_over_50_kb(built_site):
    report = measure_pages.site_charts(built_site)
    assert sum(len(c) for c in report.values()) > 0, "no chart found in the site"
    over = measure_pages.too_big(report, LIMIT_BYTES)
    assert not over, "charts over 50 KB: " + ", ".join(
        f"{page} {c['id']} ({c['bytes']:,} B)" for page, c in over
    )
