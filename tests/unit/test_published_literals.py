"""No published figure is typed twice: models and charts read them from data/.

Every hardware, network, price and power figure lives once, in a CSV row of
``data/`` that says where it comes from, and ``src/clusterlab/models`` and
every topic's charts and diagrams read it through ``cl.published``. This test
parses their source and fails on a numeric literal that

* is a large number (10**6 or more: a rate, a FLOP/s, a size in bytes) equal
  to a figure of a ``data/`` table, or to it times or over 8 (bits and
  bytes), or
* is the default or the value of a name that holds a rate, an efficiency, a
  GPU spec, a price or a power (``*_Bps``, ``*_bps``, ``*flops``,
  ``*efficiency``, ``*price*``, ``*_usd``, ``*_W``, ``pue`` ...).

Integers below 100 (counts: 8 GPUs, 2 bytes, 80 layers) and the numbers 0, 1,
0.5 and 2 are left alone: they are not published figures.
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "src" / "clusterlab"
#: The closed-form models, and every topic's charts and diagrams (and the base).
SCANNED_FILES = sorted(
    [*(PKG / "models").rglob("*.py"), PKG / "core" / "diagram.py"]
    + [p for p in PKG.glob("*/*.py") if p.stem in ("chart", "diagram", "spacetime")]
)
#: Names whose values are published figures or stand in for one.
FIGURE_NAME = re.compile(
    r"(_bps$|_Bps$|bandwidth|flops$|effic|price|_usd|usd_|cost_per|_per_hour"
    r"|tdp|_W$|watts|pue|kwh|line_rate|hbm)",
    re.IGNORECASE,
)
SCALES = (1.0, 8.0, 1 / 8)
LARGE = 1e6


def _published_figures() -> set[float]:
    figures = set()
    for csv in sorted((ROOT / "data").glob("*.csv")):
        for col in pd.read_csv(csv).select_dtypes("number"):
            for v in pd.read_csv(csv)[col].dropna():
                if abs(v) >= LARGE:
                    figures.add(float(v))
    return figures


def _is_trivial(v: float) -> bool:
    return v in (0, 1, 0.5, 2, -1) or (v == int(v) and abs(v) < 100)


def _is_unit_scale(v: float) -> bool:
    """A power of ten (1e9 for GB, 1e12 for TB): a unit, not a figure.

    8.0 TB/s over 8 is 1e12, so without this every ``/ 1e12`` would match it.
    """
    return v > 0 and 10 ** round(math.log10(v)) == v


def _matches(v: float, figures: set[float]) -> float | None:
    for f in figures:
        for s in SCALES:
            g = f * s
            if g and math.isclose(v, g, rel_tol=2e-3):
                return f
    return None


def _numbers(node):
    """Numeric literals in an expression, with unary minus folded in."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and type(sub.value) in (int, float):
            yield float(sub.value)


def _figure_part(value):
    """What of a named value could be a figure: all of it, or a control's default.

    A ``Range(...)`` (``cl.core.controls``) named after a price holds the ends
    and step of a slider, which no table publishes; its ``default`` may be a
    figure, so that is still scanned.
    """
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "Range"
    ):
        parts = [k.value for k in value.keywords if k.arg == "default"]
        return ast.Tuple(elts=parts, ctx=ast.Load())
    return value


def scan_source(source: str, figures: set[float]) -> list[str]:
    """Lines of ``source`` that type a published figure; see the module docstring."""
    hits = []
    tree = ast.parse(source)
    named = []  # (name, value expression)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    named.append((t.id, node.value))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if node.value is not None:
                named.append((node.target.id, node.value))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            pos = a.posonlyargs + a.args
            for arg, d in zip(
                pos[len(pos) - len(a.defaults) :], a.defaults, strict=True
            ):
                named.append((arg.arg, d))
            for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True):
                if d is not None:
                    named.append((arg.arg, d))
        elif isinstance(node, ast.keyword) and node.arg:
            named.append((node.arg, node.value))
    for name, value in named:
        if FIGURE_NAME.search(name):
            for v in _numbers(_figure_part(value)):
                if not _is_trivial(v):
                    hits.append(f"line {value.lineno}: {name} = {v:g}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            v = float(node.value)
            if abs(v) < LARGE or _is_unit_scale(v):
                continue
            f = _matches(v, figures)
            if f is not None:
                hits.append(f"line {node.lineno}: {v:g} is the published figure {f:g}")
    return sorted(set(hits))


@pytest.fixture(scope="module")
def figures():
    return _published_figures()


@pytest.mark.parametrize(
    "path",
    SCANNED_FILES,
    ids=lambda p: str(p.relative_to(ROOT / "src" / "clusterlab")),
)
def test_no_published_figure_is_typed_in_models_or_charts(path, figures):
    hits = scan_source(path.read_text(encoding="utf-8"), figures)
    assert not hits, (
        f"{path.relative_to(ROOT)} types figures that belong in data/ "
        "(read them with cl.published.value):\n" + "\n".join(hits)
    )


def test_the_scan_catches_a_typed_rate_a_default_and_a_price(figures):
    src = (
        "NVLINK = 450e9\n"
        "def step(x, link_Bps=12.5e9, price_per_hour=2.5):\n"
        "    return x\n"
        "def f(x):\n"
        "    return g(x, efficiency=0.92)\n"
    )
    hits = scan_source(src, figures | {4.5e11})
    assert any("450" in h or "4.5e+11" in h for h in hits)
    assert any("link_Bps" in h for h in hits)
    assert any("price_per_hour" in h for h in hits)
    assert any("efficiency" in h for h in hits)


def test_the_scan_reads_a_price_control_s_default_but_not_its_slider(figures):
    src = (
        "CLOUD_PRICE = Range('c', min=1.0, max=8.0, step=0.05, default=price())\n"
        "KWH = Range('kwh', min=0.03, max=0.4, step=0.005, default=0.0825)\n"
    )
    assert scan_source(src, figures) == ["line 2: KWH = 0.0825"]


def test_the_scan_leaves_unit_scales_alone_but_not_a_figure_near_one():
    src = "def tb(x):\n    return x / 1e12, x / 1e9\nTYPED = 8.0e12 / 8\n"
    hits = scan_source(src, {8.0e12, 1.0e11})
    assert hits == ["line 3: 8e+12 is the published figure 8e+12"]


def test_the_scan_leaves_counts_and_shapes_alone(figures):
    src = (
        "GPUS = 8\nLAYERS = 80\nHALF = 0.5\ndef f(n_params=7e9):\n    return n_params\n"
    )
    assert scan_source(src, figures) == []
