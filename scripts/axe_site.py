"""Check every page of a built book against WCAG 2.1 A and AA with axe-core.

    .venv/bin/python scripts/axe_site.py --site _build/html

serves the built site on loopback, opens each page of ``_toc.yml`` in headless
Chromium with every other request refused, runs axe-core (the copy that the
pinned ``axe-playwright-python`` package ships) with the WCAG 2.0 and 2.1 A and
AA rules, and prints the violations counted by rule and by impact. The exit
status is non-zero if any violation is critical or serious. The site test
(``tests/test_site.py``) runs the same check on each page it visits.
"""

from __future__ import annotations

import argparse
import collections
import functools
import http.server
import json
import sys
import threading
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

#: The WCAG 2.0 and 2.1 rules at levels A and AA (axe-core's tags).
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]

#: Rules that axe-core 4.12 still calls experimental, and so leaves out of a
#: run by tags, although they test WCAG 2.1 A (2.5.3, Label in Name).
EXTRA_RULES = ["label-content-name-mismatch"]

#: Impacts that fail a page; "moderate" and "minor" ones are counted and printed.
FAILING = ("critical", "serious")


def axe_source() -> str:
    """The axe-core script, from the installed ``axe-playwright-python``."""
    import axe_playwright_python

    path = Path(axe_playwright_python.__file__).parent / "axe.min.js"
    return path.read_text(encoding="utf-8")


def axe_version() -> str:
    """axe-core's version, as its script states it (``4.12.1``)."""
    import re

    found = re.search(r"axe v(\d+\.\d+\.\d+)", axe_source()[:2000])
    return found.group(1) if found else "unknown"


#: Set on a code token whose colours, size and background an earlier token of
#: the same page already showed, while the contrast rule runs (``run_axe``);
#: it keeps the token's own inline ``visibility``, restored afterwards.
SEEN_COLOURS = "data-axe-colours-seen"

_HIDE_REPEATED_TOKENS = """attr => {
  const seen = new Set();
  let hidden = 0;
  for (const el of document.querySelectorAll('.highlight span')) {
    const own = getComputedStyle(el);
    const keys = [own.color, own.backgroundColor, own.fontSize, own.fontWeight,
                  own.fontStyle, own.opacity, own.textShadow];
    for (let up = el.parentElement; up; up = up.parentElement) {
      const bg = getComputedStyle(up);
      keys.push(bg.backgroundColor, bg.backgroundImage, bg.opacity);
      if (bg.backgroundColor !== 'rgba(0, 0, 0, 0)') break;
    }
    const key = keys.join('|');
    if (!seen.has(key)) { seen.add(key); continue; }
    el.setAttribute(attr, el.style.visibility);
    el.style.visibility = 'hidden';
    hidden++;
  }
  return hidden;
}"""

_SHOW_REPEATED_TOKENS = """attr => {
  for (const el of document.querySelectorAll(`[${attr}]`)) {
    el.style.visibility = el.getAttribute(attr);
    el.removeAttribute(attr);
  }
}"""


def run_axe(page) -> list[dict]:
    """The WCAG A/AA violations on ``page`` (a Playwright page), as axe reports
    them: one dict per rule, with ``id``, ``impact``, ``help`` and ``nodes``.

    Colour contrast, by far the slowest rule (4.4 s of a code-heavy lab's 5 s
    on two cores), is one computation per look of a code token, repeated for
    every token. So axe runs with each code token hidden whose colours, size,
    weight and backgrounds an earlier token of the page already has (hidden
    text is not checked; the tokens are plain ``span`` elements with a class,
    which no other rule looks at): every look on every page is still checked,
    once. A test plants a pale token and expects it caught.
    """
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(axe_source())
    options = {
        "runOnly": {"type": "tag", "values": WCAG_TAGS},
        "rules": {rule: {"enabled": True} for rule in EXTRA_RULES},
        "resultTypes": ["violations"],
    }
    page.evaluate(_HIDE_REPEATED_TOKENS, SEEN_COLOURS)
    try:
        return page.evaluate(
            "opts => axe.run(document, opts).then(r => r.violations)", options
        )
    finally:
        page.evaluate(_SHOW_REPEATED_TOKENS, SEEN_COLOURS)


def count(violations: list[dict]) -> collections.Counter:
    """Elements in violation, by ``(impact, rule)``."""
    c = collections.Counter()
    for v in violations:
        c[(v.get("impact") or "minor", v["id"])] += len(v["nodes"])
    return c


def failing(violations: list[dict]) -> list[str]:
    """A line per critical or serious violation: rule, help and the first targets."""
    lines = []
    for v in violations:
        if v.get("impact") in FAILING:
            targets = [" ".join(map(str, n["target"])) for n in v["nodes"][:3]]
            lines.append(
                f"{v['impact']} {v['id']} ({len(v['nodes'])}x): {v['help']}; "
                f"e.g. {targets}"
            )
    return lines


def toc_pages(root: Path = ROOT) -> list[str]:
    """Every page of ``_toc.yml`` as the path of its HTML file."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                files.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc.get("parts", []))
    return [f"{f}.html" for f in files]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", default=str(ROOT / "_build" / "html"))
    parser.add_argument("--json", default=None, help="write the counts here")
    parser.add_argument("pages", nargs="*", help="pages (default: all of _toc.yml)")
    args = parser.parse_args()
    site = Path(args.site).resolve()
    pages = args.pages or [p for p in toc_pages() if (site / p).exists()]
    handler = functools.partial(_Quiet, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}/"
    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(ROOT / "tests"))
    from book_helpers import chromium_path

    total, by_page = collections.Counter(), {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium_path(), args=["--no-sandbox", "--disable-gpu"]
        )
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.route(
            "**/*",
            lambda r: (
                r.continue_()
                if r.request.url.startswith((base, "data:", "blob:"))
                else r.abort()
            ),
        )
        page = context.new_page()
        for name in pages:
            page.goto(base + name, wait_until="load")
            page.wait_for_timeout(1500)  # the charts draw
            found = count(run_axe(page))
            by_page[name] = {f"{i} {r}": n for (i, r), n in sorted(found.items())}
            total.update(found)
            bad = sum(n for (i, _), n in found.items() if i in FAILING)
            print(f"{name}: {bad} critical or serious, {sum(found.values())} in all")
        browser.close()
    httpd.shutdown()
    print(f"\naxe-core {axe_version()}, {len(pages)} pages, WCAG {WCAG_TAGS}")
    for impact in ("critical", "serious", "moderate", "minor"):
        rules = {r: n for (i, r), n in total.items() if i == impact}
        print(f"{impact}: {sum(rules.values())} {dict(sorted(rules.items()))}")
    if args.json:
        Path(args.json).write_text(json.dumps(by_page, indent=1))
    return 1 if any(i in FAILING for i, _ in total) else 0


if __name__ == "__main__":
    sys.exit(main())
