"""Measure how big each chart of a built book is, as its pages hold it.

    .venv/bin/python scripts/measure_pages.py --site _build/html

reads every page of a built site (the ``_build/html`` folder of ``make book``, or
of ``scripts/build_pages.py --out FOLDER``) and finds each chart the book build
wrote into it: a ``<div id="cl-vis-…">`` and the script after it that calls the
site's ``vegaEmbed`` with the chart's specification. A chart is measured from
the ``<div`` to the end of its ``</script>``, in bytes of UTF-8, as the page
holds it: charts in a cell's output are plain HTML, charts in a widget's
``Output`` sit JSON-escaped in the page's widget state, and both are counted.
It prints, for every page with charts, how many it has and the largest, then
every chart larger than ``--limit-bytes`` (default 50 KB) with its page; the
exit status is non-zero if there is one, or if the folder holds no page.
``--json PATH`` also writes every size found.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

LIMIT_BYTES = 50_000
#: The ``<div>`` that opens a chart; in widget state its quotes are escaped.
CHART_START = re.compile(r'<div id=\\?"(cl-vis-[0-9a-f]+)\\?"')
#: The end of the script that draws it (``<\/script>`` inside JSON).
CHART_END = re.compile(r"\}\)\(\);<\\?/script>")
#: Folders of a built site that hold no page of the book.
SKIP_DIRS = {"_static", "_sources", "_images", "_sphinx_design_static"}
SKIP_PAGES = {"genindex.html", "search.html", "index.html"}


def page_charts(html: str) -> list[dict]:
    """Every chart in one page's HTML: its ``cl-vis`` id and its size in bytes.

    Args:
        html: the text of a built page.

    Returns:
        One dict per chart, in page order, with ``id`` (the ``<div>``'s id),
        ``bytes`` (UTF-8 bytes from ``<div`` to the end of ``</script>``) and
        ``escaped`` (True where the chart sits JSON-escaped in widget state).
    """
    found = []
    for start in CHART_START.finditer(html):
        end = CHART_END.search(html, start.end())
        if end is None:
            raise ValueError(
                f"html: chart {start.group(1)} has no closing script; "
                "expected '})();</script>' after its <div>"
            )
        text = html[start.start() : end.end()]
        found.append(
            {
                "id": start.group(1),
                "bytes": len(text.encode()),
                "escaped": text.startswith('<div id=\\"'),
            }
        )
    return found


def site_pages(site: Path) -> list[Path]:
    """The HTML pages of the book in a built site folder, sorted by path."""
    pages = []
    for path in sorted(site.rglob("*.html")):
        rel = path.relative_to(site)
        if rel.parts[0] in SKIP_DIRS or str(rel) in SKIP_PAGES:
            continue
        pages.append(path)
    return pages


def site_charts(site: Path) -> dict[str, list[dict]]:
    """Every chart of every page of ``site``: page (e.g. ``labs/02_clocks``) -> charts.

    Args:
        site: the ``_build/html`` folder of a build.

    Returns:
        For each page, ``page_charts`` of its HTML (pages without a chart included).
    """
    site = Path(site)
    if not site.is_dir():
        raise ValueError(f"site={str(site)!r} must be the folder of a built site")
    return {
        str(p.relative_to(site).with_suffix("")): page_charts(
            p.read_text(encoding="utf-8")
        )
        for p in site_pages(site)
    }


def too_big(report: dict[str, list[dict]], limit_bytes: int = LIMIT_BYTES) -> list:
    """``(page, chart)`` for each chart of ``report`` over ``limit_bytes``."""
    return [
        (page, chart)
        for page, charts in report.items()
        for chart in charts
        if chart["bytes"] > limit_bytes
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", default="_build/html", help="a built site folder")
    parser.add_argument("--json", default=None, help="write the sizes here")
    parser.add_argument("--limit-bytes", type=int, default=LIMIT_BYTES)
    args = parser.parse_args()
    report = site_charts(Path(args.site))
    if not report:
        print(f"no page in {args.site}")
        return 1
    for page, charts in report.items():
        if charts:
            sizes = [c["bytes"] for c in charts]
            print(
                f"{page}: {len(sizes)} charts, median "
                f"{statistics.median(sizes):,.0f} B, largest {max(sizes):,} B"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    over = too_big(report, args.limit_bytes)
    for page, chart in over:
        print(f"too big: {page} {chart['id']}: {chart['bytes']:,} B")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
