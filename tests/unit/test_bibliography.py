"""references.bib parses, and every key the pages cite is in it."""

from __future__ import annotations

import re
from pathlib import Path

import pybtex.database

ROOT = Path(__file__).resolve().parents[2]


def test_the_bibliography_parses_and_holds_every_cited_key():
    entries = pybtex.database.parse_file(ROOT / "references.bib").entries
    cited = set()
    pages = [*ROOT.glob("book/**/*.md"), ROOT / "intro.md", *ROOT.glob("labs/*.ipynb")]
    for page in pages:
        for keys in re.findall(r"\{cite:[a-z]+\}`([^`]+)`", page.read_text()):
            cited |= {k.strip() for k in keys.split(",")}
    missing = sorted(k for k in cited if k not in entries)
    assert cited and not missing, f"cited but not in references.bib: {missing}"
