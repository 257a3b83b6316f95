"""Every Vega input of the package is built by a control spec, or listed here.

A slider's range typed in a chart (``alt.binding_range(min=3, max=15, ...)``)
is a range that a live widget can type again, differently. So the package
builds its page inputs through ``cl.core.controls`` (``Range``/``Choice``),
and this test reads every source file for the ``binding_range``,
``binding_select``, ``binding_radio`` and ``binding_checkbox`` calls left
outside ``core/controls.py``. Each must be listed in ``LEFT`` with its reason,
and none may type its range: its ends, step and options must come from the
data the chart draws. A new call, or a typed literal in a listed one, fails.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "src" / "clusterlab"
SPEC_FILE = PKG / "core" / "controls.py"
BINDINGS = {"binding_range", "binding_select", "binding_radio", "binding_checkbox"}
RANGE_ARGS = {"min", "max", "step", "options"}

#: ``file::function`` -> (number of calls, why they are not built by a spec)
LEFT = {
    "core/diagram.py::step_param": (1, "a step index: 0 to the diagram's last step"),
    "data_parallel/chart.py::zero_memory_chart": (
        1,
        "model sizes as labels ('7B') of the sweep; the live slider moves "
        "log10 parameters",
    ),
    "decide/chart.py::decision_chart": (
        1,
        "the table's workloads; the live menu offers the caller's presets",
    ),
    "interconnects/chart.py::step_time_chart": (
        1,
        "the sweep's model sizes in billions; the live slider moves log10 parameters",
    ),
    "long_context/chart.py::cp_time_chart": (
        1,
        "where the ranks are joined, from the sweep; no live control has it",
    ),
    "message_passing/chart.py::world_size_chart": (1, "the measured world sizes"),
    "planner/chart.py::planner_explorer": (
        1,
        "the swept 'model on N GPUs' cases; the live menu picks the model alone",
    ),
    "ring/chart.py::allreduce_algorithms_chart": (
        3,
        "the sweep's α (µs), bandwidth (GB/s) and log2 sizes; the live sliders "
        "move α in s and β in B/s; the pages and Lab 05 draw "
        "allreduce_model_chart instead",
    ),
    "ring/chart.py::ring_timing_chart": (1, "the measured world sizes"),
    "roofline/chart.py::roofline_chart": (
        1,
        "the machines drawn; the live widget moves a peak and a bandwidth",
    ),
}


#: Literals a listed call may type, with the reason.
TYPED_OK = {
    ("core/diagram.py", "step_param", "min"): "step indices start at 0",
    ("core/diagram.py", "step_param", "step"): "step indices are whole numbers",
}


def _is_binding(call: ast.Call) -> bool:
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
    return name in BINDINGS


def _typed(node) -> bool:
    """A literal number, string or a list/tuple holding only literals."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return _typed(node.operand)
    if isinstance(node, ast.List | ast.Tuple):
        return all(_typed(e) for e in node.elts)
    return False


def binding_calls(source: str) -> tuple[Counter, list[str]]:
    """The binding calls of ``source`` by enclosing function, and typed ranges.

    Returns:
        ``Counter`` of ``function`` (``<module>`` at top level) -> calls, and
        ``(line, function, argument)`` for each argument of ``RANGE_ARGS``
        typed as a literal.
    """
    tree = ast.parse(source)
    owner = {}
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(fn):
                owner.setdefault(id(node), fn.name)  # outermost function wins
    calls, typed = Counter(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_binding(node):
            where = owner.get(id(node), "<module>")
            calls[where] += 1
            for k in node.keywords:
                if k.arg in RANGE_ARGS and _typed(k.value):
                    typed.append((node.lineno, where, k.arg))
    return calls, sorted(typed)


def _package_calls() -> tuple[dict, list[str]]:
    found, typed = {}, []
    for path in sorted(PKG.rglob("*.py")):
        if path == SPEC_FILE:
            continue
        rel = path.relative_to(PKG).as_posix()
        calls, lines = binding_calls(path.read_text(encoding="utf-8"))
        found.update({f"{rel}::{fn}": n for fn, n in calls.items()})
        typed += [
            f"{rel} line {line} ({fn}): {arg} is typed"
            for line, fn, arg in lines
            if (rel, fn, arg) not in TYPED_OK
        ]
    return found, typed


def test_every_page_input_outside_the_specs_is_listed_with_its_reason():
    found, _ = _package_calls()
    listed = {key: n for key, (n, _) in LEFT.items()}
    new = {k: n for k, n in found.items() if listed.get(k) != n}
    gone = {k: n for k, n in listed.items() if k not in found}
    assert not new, (
        f"page inputs built outside cl.core.controls: {new}; build them from a "
        "Range or Choice, or list them in LEFT with the reason"
    )
    assert not gone, f"LEFT lists page inputs that are gone: {gone}"
    assert all(reason for _, reason in LEFT.values())


def test_no_page_input_types_its_range():
    _, typed = _package_calls()
    assert typed == [], "ranges typed outside a control spec:\n" + "\n".join(typed)


def test_the_scan_finds_a_typed_range_and_a_new_call():
    source = (
        "import altair as alt\n"
        "def explorer(df):\n"
        "    sizes = sorted(df['n'])\n"
        "    a = alt.binding_radio(options=sizes, name='n ')\n"
        "    b = alt.binding_range(min=-7, max=-2, step=0.05, name='α ')\n"
        "    return a, b\n"
        "PICK = alt.binding_select(options=['a', 'b'])\n"
    )
    calls, typed = binding_calls(source)
    assert calls == Counter({"explorer": 2, "<module>": 1})
    assert typed == [
        (5, "explorer", "max"),
        (5, "explorer", "min"),
        (5, "explorer", "step"),
        (7, "<module>", "options"),
    ]
