"""The all-reduce explorer's page chart computes ``allreduce_time``, in Vega.

``cl.ring.chart.allreduce_model_chart`` carries no table: its rows (every power
of two from 2 to 4096 GPUs) and the ring, tree and hierarchical times are made
in the page by ``sequence``, ``calculate`` and ``fold`` transforms from the
sliders' parameters. These tests run those transforms, as the page holds them
(``lean_spec(accessible(...))``), in Vega itself (``vl-convert``, the engine the
book's build uses; no browser), at the sliders' starting values and after moves,
and compare every time with ``cl.models.collectives.allreduce_time``. Wrong
expressions planted in the same spec (a ring without its ``2(n-1)/n``, a tree
with ``n - 1`` rounds, a hierarchical one that sends the whole message across
the nodes) must fail the same comparison.
"""

from __future__ import annotations

import copy
import itertools

import numpy as np
import pandas as pd
import pytest

import clusterlab as cl
from clusterlab.core.theme import accessible, lean_spec
from clusterlab.models.collectives import ALGORITHMS, allreduce_time
from clusterlab.models.links import LINKS
from clusterlab.ring import chart as ring_chart

vl_convert = pytest.importorskip("vl_convert")
from vega_helpers import data_marks, scene_texts, vega_eval  # noqa: E402

CONTROLS = ring_chart.ALLREDUCE_CONTROLS
NAMES = [spec.name for spec in CONTROLS]  # log_alpha, log_bw, log2_bytes


# ----------------------------------------------------------------- the harness
def page_spec(chart=None) -> dict:
    """The spec as the book's page draws it."""
    chart = chart or ring_chart.allreduce_model_chart()
    return lean_spec(accessible(chart.to_dict()))


def _lines_layer(spec: dict) -> dict:
    (layer,) = [v for v in spec["layer"] if any("fold" in t for t in v["transform"])]
    return layer


def twin_times(spec: dict, **moved) -> pd.DataFrame:
    """The lines' rows, made in Vega by the spec's own data and transforms.

    Args:
        spec: the chart's spec (its parameters start at their values there).
        **moved: parameter values to use instead, by name.

    Returns:
        Columns ``algorithm, gpus, time_s``, one row per point of a line.
    """
    layer = _lines_layer(spec)
    values = {p["name"]: p["value"] for p in spec["params"]}
    assert set(moved) <= set(values), moved
    values.update(moved)
    row = "datum.algorithm + '|' + datum.gpus + '|' + datum.time_s"
    probe = {
        "data": layer["data"],
        "params": [{"name": k, "value": v} for k, v in values.items()],
        "transform": [*layer["transform"], {"calculate": row, "as": "__row"}],
        "mark": "text",
        "encoding": {"text": {"field": "__row", "type": "nominal"}},
    }
    rows = [t.split("|") for t in scene_texts(probe)]
    return pd.DataFrame(
        [(a, int(float(n)), float(t)) for a, n, t in rows],
        columns=["algorithm", "gpus", "time_s"],
    )


def model_times(gpus, log_alpha, log_bw, log2_bytes) -> pd.DataFrame:
    """``allreduce_time`` at the same points, with Lab 05's node topology."""
    fast = LINKS["NVLink 4"]
    rows = []
    for n, algorithm in itertools.product(gpus, ALGORITHMS):
        topo = {}
        if algorithm == "hierarchical":
            topo = {
                "gpus_per_node": min(n, 8),
                "intra_alpha_s": fast.alpha_s,
                "intra_bandwidth_Bps": fast.effective_Bps,
            }
        t = allreduce_time(
            2.0**log2_bytes, n, 10.0**log_alpha, 10.0**log_bw, algorithm, **topo
        )
        rows.append((algorithm, n, t))
    return pd.DataFrame(rows, columns=["algorithm", "gpus", "time_s"])


def assert_twin_is_model(spec: dict, rtol: float = 1e-9, **moved) -> int:
    """Every point of the twin equals the model; returns how many were compared."""
    got = twin_times(spec, **moved)
    at = {p["name"]: p["value"] for p in spec["params"]} | moved
    want = model_times(sorted(set(got["gpus"])), *(at[k] for k in NAMES))
    both = got.merge(want, on=["algorithm", "gpus"], suffixes=("", "_model"))
    assert len(both) == len(got) == len(want), (len(got), len(want))
    np.testing.assert_allclose(both["time_s"], both["time_s_model"], rtol=rtol)
    return len(both)


#: Slider settings away from the start: each end of each slider, and between.
MOVED = [
    {"log_alpha": -7.0},
    {"log_alpha": -3.0},
    {"log_bw": 8.0},
    {"log_bw": 12.0},
    {"log2_bytes": 10},
    {"log2_bytes": 36},
    {"log_alpha": -6.25, "log_bw": 9.3, "log2_bytes": 17},
    {"log_alpha": -3.0, "log_bw": 12.0, "log2_bytes": 10},
]


# ------------------------------------------------------------------- the tests
def test_the_twin_carries_no_table_and_starts_at_the_specs_defaults():
    spec = page_spec()
    # one empty row, for the readout of the sliders' values
    assert list(spec.get("datasets", {}).values()) in ([], [[{}]])
    assert "sequence" in _lines_layer(spec)["data"]
    starts = {p["name"]: p["value"] for p in spec["params"]}
    assert starts == pytest.approx({s.name: s.default for s in CONTROLS}, rel=1e-11)


def test_the_gpu_axis_is_every_power_of_two_from_2_to_4096():
    got = twin_times(page_spec())
    assert sorted(set(got["gpus"])) == [2**k for k in range(1, 13)]
    assert sorted(set(got["algorithm"])) == sorted(ALGORITHMS)


def test_at_its_start_the_twin_is_allreduce_time():
    assert assert_twin_is_model(page_spec()) == 36


@pytest.mark.parametrize("moved", MOVED, ids=lambda m: ",".join(map(str, m.items())))
def test_after_a_move_the_twin_is_allreduce_time(moved):
    assert assert_twin_is_model(page_spec(), **moved) == 36


def _planted(spec: dict, algorithm: str, old: str, new: str) -> dict:
    wrong = copy.deepcopy(spec)
    for t in _lines_layer(wrong)["transform"]:
        if t.get("as") == algorithm:
            assert old in t["calculate"], (old, t["calculate"])
            t["calculate"] = t["calculate"].replace(old, new)
    assert wrong != spec
    return wrong


n, g = "datum.gpus", "min(datum.gpus, 8)"
WRONG = {  # algorithm: (right part, wrong part)
    # the bytes term of a ring without its 2(n-1)/n: each rank sends S once
    "ring": (f"+ 2 * ({n} - 1) / {n} * ", "+ "),
    # a tree of n - 1 rounds, as many as a ring's
    "tree": (f"ceil(log({n}) / LN2 - 1e-9)", f"({n} - 1)"),
    # a hierarchical all-reduce that sends the whole message across the nodes
    "hierarchical": (f"(pow(2, log2_bytes) / {g})", "(pow(2, log2_bytes))"),
}


@pytest.mark.parametrize("algorithm", sorted(WRONG))
def test_a_wrong_formula_fails_the_comparison(algorithm):
    spec = page_spec()
    wrong = _planted(spec, algorithm, *WRONG[algorithm])
    with pytest.raises(AssertionError):
        assert_twin_is_model(wrong)
    assert assert_twin_is_model(spec) == 36  # the right one still passes


def test_a_wrong_ring_is_caught_only_beyond_two_gpus():
    """At n = 2, 2(n-1)/n is 1: the comparison needs several GPU counts."""
    spec = page_spec()
    wrong = _planted(spec, "ring", *WRONG["ring"])
    got = twin_times(wrong).query("algorithm == 'ring'").set_index("gpus")
    want = model_times([2, 4096], *(p["value"] for p in spec["params"]))
    want = want.query("algorithm == 'ring'").set_index("gpus")["time_s"]
    assert got.at[2, "time_s"] == pytest.approx(want[2], rel=1e-9)
    assert got.at[4096, "time_s"] != pytest.approx(want[4096], rel=0.1)


def test_the_expression_builders_hold_at_any_whole_gpu_count():
    """Beyond the chart's powers of two: ``ceil`` of a tree's rounds, nodes of 8."""
    fast = LINKS["NVLink 4"]
    size, alpha, bw = "datum.s", "datum.a", "datum.b"
    exprs = {
        "ring": ring_chart.ring_expr(size, "datum.n", alpha, bw),
        "tree": ring_chart.tree_expr(size, "datum.n", alpha, bw),
        "hierarchical": ring_chart.hierarchical_expr(
            size, "datum.n", alpha, bw, "8", repr(fast.alpha_s),
            repr(fast.effective_Bps),
        ),
    }  # fmt: skip
    gpus = [1, 3, 5, 6, 7, 9, 1000, 2**23, 2**23 + 1, 10**7]
    cases = [(n, 3e7, 2e-5, 7e9) for n in gpus]
    cases += [(n, 2.0**30, 4e-6, 5e10) for n in (8, 24, 40, 4104, 2**23)]
    rows = [dict(zip("nsab", c, strict=True)) for c in cases]
    for algorithm, expr in exprs.items():
        keep = [r for r in rows if algorithm != "hierarchical" or r["n"] % 8 == 0]
        got = vega_eval([{"calculate": expr, "as": "t"}], keep)["t"]
        topo = {"gpus_per_node": 8, "intra_alpha_s": fast.alpha_s}
        topo["intra_bandwidth_Bps"] = fast.effective_Bps
        for i, r in enumerate(keep):
            want = allreduce_time(
                r["s"], r["n"], r["a"], r["b"], algorithm,
                **(topo if algorithm == "hierarchical" else {}),
            )  # fmt: skip
            assert got[i] == pytest.approx(want, rel=1e-9), (algorithm, r)


@pytest.mark.parametrize("moved", [{}, *MOVED], ids=lambda m: str(m) or "start")
def test_the_page_draws_its_lines_at_the_start_and_after_each_move(moved):
    spec = page_spec()
    spec["params"] = [
        {**p, "value": moved.get(p["name"], p["value"])} for p in spec["params"]
    ]
    scene = vl_convert.vegalite_to_scenegraph(spec)["scenegraph"]
    assert data_marks(scene, ("symbol",)) == 36, "one point per algorithm and GPU count"
    assert data_marks(scene, ("line",)) == 36


def _readout(node) -> list[str]:
    if isinstance(node, dict):
        if node.get("marktype") == "text" and node.get("role") == "mark":
            return [item["text"] for item in node.get("items", [])]
        return [t for v in node.values() for t in _readout(v)]
    if isinstance(node, list):
        return [t for v in node for t in _readout(v)]
    return []


@pytest.mark.parametrize(
    ("moved", "text"),
    [
        ({}, "α = 10 µs per step · 12.5 GB/s per GPU · 256 MiB"),
        (
            {"log_alpha": -3.0, "log_bw": 12.0, "log2_bytes": 10},
            "α = 1000 µs per step · 1000 GB/s per GPU · 1 KiB",
        ),
        (
            {"log_alpha": -6.25, "log_bw": 9.3, "log2_bytes": 36},
            "α = 0.562 µs per step · 2 GB/s per GPU · 64 GiB",
        ),
    ],
)
def test_the_readout_says_the_sliders_values_in_units(moved, text):
    spec = page_spec()
    spec["params"] = [
        {**p, "value": moved.get(p["name"], p["value"])} for p in spec["params"]
    ]
    scene = vl_convert.vegalite_to_scenegraph(spec)["scenegraph"]
    assert _readout(scene) == [text]


def test_the_live_widget_draws_the_twin_at_the_same_values(monkeypatch):
    pytest.importorskip("ipywidgets")
    drawn = []
    real = ring_chart.allreduce_model_chart

    def record(*args, **kwargs):
        chart = real(*args, **kwargs)
        drawn.append(chart)
        return chart

    monkeypatch.setattr(cl.ring.widget, "allreduce_model_chart", record)
    cl.ring.widget.allreduce_algorithm_explorer()
    (live,) = drawn
    live_spec, twin = live.to_dict(), ring_chart.allreduce_model_chart().to_dict()
    assert all("bind" not in p for p in live_spec["params"])
    assert {p["name"]: p["value"] for p in live_spec["params"]} == pytest.approx(
        {p["name"]: p["value"] for p in twin["params"]}, rel=1e-12
    )
    strip = {k: v for k, v in twin.items() if k != "params"}
    assert {k: v for k, v in live_spec.items() if k != "params"} == strip


def test_the_twin_is_small():
    import json

    size = len(json.dumps(page_spec(), separators=(",", ":")))
    assert size < 6_000, size


@pytest.mark.parametrize("moved", [{}, *MOVED], ids=lambda m: str(m) or "start")
def test_the_chart_fits_the_text_column(moved):
    """688 px, the book's column in a 1280 px window; the y labels widen it."""
    import re

    spec = page_spec()
    spec["params"] = [
        {**p, "value": moved.get(p["name"], p["value"])} for p in spec["params"]
    ]
    svg = vl_convert.vegalite_to_svg(spec)
    width = float(re.search(r'<svg[^>]* width="([\d.]+)"', svg).group(1))
    assert width <= 688, width


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="alpha_s"):
        ring_chart.allreduce_model_chart(alpha_s=-1.0)
    with pytest.raises(ValueError, match="gpus_per_node"):
        ring_chart.allreduce_model_chart(gpus_per_node=6)
    with pytest.raises(ValueError, match="intra"):
        ring_chart.allreduce_model_chart(intra="carrier pigeon")
