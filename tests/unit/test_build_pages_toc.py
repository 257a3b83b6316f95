"""scripts/build_pages.py lists every page once in its table of contents."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location(
        "build_pages", ROOT / "scripts" / "build_pages.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _files(toc):
    return [c["file"] for part in toc["parts"] for c in part["chapters"]]


def test_the_bibliography_and_a_page_named_twice_are_listed_once():
    bp = _script()
    toc = bp.toc_for(["labs/02_clocks", bp.BIBLIOGRAPHY, "labs/02_clocks", "intro"])
    assert _files(toc) == ["labs/02_clocks", bp.BIBLIOGRAPHY]
    assert toc["root"] == "intro"
    assert _files(bp.toc_for([bp.BIBLIOGRAPHY])) == [bp.BIBLIOGRAPHY]
