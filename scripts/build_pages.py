"""Build a few pages of the book, fast, to check them while writing.

    .venv/bin/python scripts/build_pages.py book/paradigm/time_and_order labs/02_clocks

builds the front page, the given pages (chapters or labs, without suffix) and
the bibliography into a fresh folder (``--out``, default a temporary one),
executing every notebook as the real build does. Links to pages left out of
this build are reported as warnings; warnings that name the given pages are
listed at the end. The exit status is non-zero if the build fails or one of
the given pages has a warning. The full book is built with ``make book``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BIBLIOGRAPHY = "book/appendix/bibliography"


def toc_for(pages: list[str]) -> dict:
    """The table of contents of a build of ``pages``, the front page and the
    bibliography; a page named twice, or one of those two named, is listed
    once (jupyter-book refuses a page that is twice in its table)."""
    mine = [p for p in dict.fromkeys(pages) if p not in ("intro", BIBLIOGRAPHY)]
    parts = [{"caption": "Back", "chapters": [{"file": BIBLIOGRAPHY}]}]
    if mine:
        parts.insert(0, {"caption": "Pages", "chapters": [{"file": p} for p in mine]})
    return {"format": "jb-book", "root": "intro", "parts": parts}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="+", help="e.g. book/paradigm/properties")
    parser.add_argument("--out", default=None, help="output folder")
    args = parser.parse_args()
    asked = list(dict.fromkeys(p.removesuffix(".md").removesuffix(".ipynb")
                               for p in args.pages))  # fmt: skip
    for page in asked:
        if not any((ROOT / f"{page}{ext}").exists() for ext in (".md", ".ipynb")):
            parser.error(f"no page {page}.md or {page}.ipynb in the book")
    out = Path(args.out or tempfile.mkdtemp(prefix="pages-")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    toc = toc_for(asked)
    toc_path = out / "_toc.yml"
    toc_path.write_text(yaml.safe_dump(toc))
    cmd = [
        str(Path(sys.executable).parent / "jupyter-book"),
        "build",
        str(ROOT),
        "-n",
        "--keep-going",
        "--toc",
        str(toc_path),
        "--path-output",
        str(out),
    ]
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    log = result.stdout + result.stderr
    mine = [
        line
        for line in log.splitlines()
        if ("WARNING" in line or "ERROR" in line) and any(p in line for p in asked)
    ]
    # A link to a page left out of this build is expected here, not an error.
    elsewhere = [line for line in mine if "unknown document" in line]
    mine = [line for line in mine if line not in elsewhere]
    print(log[-3000:] if result.returncode else "build finished")
    for line in elsewhere:
        print("(links to a page not in this build)", line)
    for line in mine:
        print(line)
    print(f"\nopen {out / '_build' / 'html' / (asked[0] + '.html')}")
    return 1 if result.returncode or mine else 0


if __name__ == "__main__":
    sys.exit(main())
