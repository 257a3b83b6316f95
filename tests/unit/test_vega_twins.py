"""Every chart that recomputes a model in the page agrees with the Python model.

A chart whose sliders work with no kernel computes its curve in the browser,
from a Vega expression: a second copy of a model, its "twin". These tests take
each twin's expressions from the chart's own spec (``chart.to_dict()``), run
them in Vega itself (the ``vl-convert`` engine the book's build uses, through
``vegalite_to_scenegraph``: no browser), at 20 or more points, and compare the
results with the Python model the chart stands in for. A deliberately wrong
expression must fail the same comparison.

The twins: goodput and Young's interval (checkpointing), the alpha–beta line
(message passing), the ring all-reduce's time and bus bandwidth (hardware),
the owned GPU's cost per useful hour and its break-even (economics), the cores
of the utilisation law (roofline) and the pipeline schedule's op end times.
Display-only expressions (labels, unit conversions of a column) are not models.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

import clusterlab as cl
from clusterlab.core.units import HOUR_S

vl_convert = pytest.importorskip("vl_convert")
from vega_helpers import vega_eval  # noqa: E402 - after the skip


# ----------------------------------------------------------------- the harness
def calculates(layer: dict) -> list[dict]:
    """A layer's ``calculate`` transforms, in order (filters and the rest skipped)."""
    return [t for t in layer.get("transform", []) if "calculate" in t]


def assert_twin(calcs, rows, params, field, want, rtol=1e-9):
    """Vega's ``field`` over ``rows`` equals ``want`` (one value per row)."""
    got = vega_eval(calcs, rows, params)[field].to_numpy()
    np.testing.assert_allclose(got, np.asarray(want, dtype=float), rtol=rtol)
    return len(rows)


def spec_of(chart) -> dict:
    return chart.to_dict()


# ------------------------------------------------------------- the harness test
def test_the_evaluator_runs_vega_and_keeps_the_row_order():
    calcs = [{"calculate": "sqrt(2 * k * datum.x) + pow(2, datum.x)", "as": "y"}]
    rows = [{"x": x} for x in (3.0, 0.5, 2.0, 10.0)]
    got = vega_eval(calcs, rows, {"k": 4.0})["y"]
    want = [math.sqrt(8 * r["x"]) + 2 ** r["x"] for r in rows]
    np.testing.assert_allclose(got, want, rtol=1e-12)


# -------------------------------------------------------------- checkpointing
GOODPUT_SETTINGS = [  # log2_gpus, gpu_mtbf_h, ckpt_s, restart_s (slider values)
    (10, 50_000.0, 60.0, 300.0),
    (14, 50_000.0, 60.0, 300.0),
    (3, 5_000.0, 5.0, 0.0),
    (15, 200_000.0, 600.0, 1800.0),
    (12, 25_000.0, 120.0, 30.0),
]
LOG_TAUS = [1.0, 1.8, 2.5, 3.2, 4.0, 4.9]


def _goodput_layers():
    spec = spec_of(cl.checkpointing.chart.goodput_explorer())
    names = {p["name"] for p in spec["params"]}
    assert {"log2_gpus", "gpu_mtbf_h", "ckpt_s", "restart_s"} <= names
    return spec["layer"]


def _job_mtbf(log2_gpus, gpu_mtbf_h):
    return cl.models.checkpointing.job_mtbf(gpu_mtbf_h * HOUR_S, 2**log2_gpus)


def _check_goodput(calcs):
    points = 0
    for g, h, c, r in GOODPUT_SETTINGS:
        params = {"log2_gpus": g, "gpu_mtbf_h": h, "ckpt_s": c, "restart_s": r}
        m = _job_mtbf(g, h)
        taus = [10**lt for lt in LOG_TAUS]
        want = cl.models.checkpointing.goodput(np.array(taus), c, m, r)
        rows = [{"log_tau": lt} for lt in LOG_TAUS]
        points += assert_twin(calcs, rows, params, "goodput", want)
    return points


def _check_young(calcs):
    points = 0
    for g, h, c in itertools.product(
        (3, 6, 9, 14, 15), (5_000.0, 80_000.0), (5.0, 600.0)
    ):
        params = {"log2_gpus": g, "gpu_mtbf_h": h, "ckpt_s": c, "restart_s": 0.0}
        want = cl.models.checkpointing.young_daly_interval(c, _job_mtbf(g, h))
        points += assert_twin(calcs, [{"k": 0}], params, "interval_s", [want])
    return points


def test_goodput_curve_is_daly_goodput():
    assert _check_goodput(calculates(_goodput_layers()[0])) >= 20


def test_young_rule_is_young_interval():
    assert _check_young(calculates(_goodput_layers()[1])) >= 20


def test_a_wrong_goodput_or_young_expression_is_caught():
    curve, rule = (calculates(layer) for layer in _goodput_layers())
    wrong_curve = [
        {**c, "calculate": c["calculate"].replace(") - 1)", ") - 0.99)")}
        if c["as"] == "goodput"
        else c
        for c in curve
    ]
    assert wrong_curve != curve
    with pytest.raises(AssertionError):
        _check_goodput(wrong_curve)
    wrong_rule = [
        {**c, "calculate": c["calculate"].replace("sqrt(2 *", "sqrt(")}
        if c["as"] == "interval_s"
        else c
        for c in rule
    ]
    assert wrong_rule != rule
    with pytest.raises(AssertionError):
        _check_young(wrong_rule)


def test_the_expression_builders_are_what_the_chart_carries():
    text = str(spec_of(cl.checkpointing.chart.goodput_explorer()))
    viz = cl.checkpointing.chart
    assert (
        viz.goodput_expr("datum.interval_s", "ckpt_s", "datum.m", "restart_s") in text
    )
    assert viz.young_expr("ckpt_s", "datum.m") in text
    assert viz.job_mtbf_expr("gpu_mtbf_h", "log2_gpus") in text


# ------------------------------------------------------------ message passing
def _alpha_beta_calcs():
    measured = pd.DataFrame({"size_bytes": [4, 2**10, 2**20], "time_s": [1e-5] * 3})
    spec = spec_of(cl.message_passing.chart.alpha_beta_explorer(measured, 2e-5, 2e9))
    return calculates(spec["layer"][0])


def _check_alpha_beta(calcs):
    points = 0
    for log_a, log_b in [(-5.0, 9.0), (-6.5, 10.2), (-2.0, 7.3), (-4.2, 11.9)]:
        sizes = [0.6, 2.0, 3.3, 5.0, 6.1, 7.7]
        want = cl.models.collectives.alpha_beta_time(
            10 ** np.array(sizes), 10**log_a, 10**log_b
        )
        params = {"log_alpha": log_a, "log_beta": log_b}
        rows = [{"log_size": s} for s in sizes]
        points += assert_twin(calcs, rows, params, "time_s", want)
    return points


def test_alpha_beta_line_is_the_alpha_beta_model():
    assert _check_alpha_beta(_alpha_beta_calcs()) >= 20


def test_a_wrong_alpha_beta_expression_is_caught():
    calcs = _alpha_beta_calcs()
    wrong = [
        {**c, "calculate": c["calculate"].replace("pow(10, log_alpha) +", "")}
        if c["as"] == "time_s"
        else c
        for c in calcs
    ]
    assert wrong != calcs
    with pytest.raises(AssertionError):
        _check_alpha_beta(wrong)


# ------------------------------------------------------------------- hardware
def test_ring_busbw_line_is_the_ring_model():
    spec = spec_of(cl.collectives.chart.busbw_model_chart(5e-5, 3e9))
    calcs = calculates(spec["layer"][0])
    model = cl.models.collectives
    points = 0
    for n, log_a, log_b in [(2, -4.3, 9.5), (8, -6.0, 11.0), (64, -2.5, 8.2)]:
        log_s = [1.2, 3.0, 5.5, 7.1, 8.8, 10.3, 4.4]
        size = 10 ** np.array(log_s)
        t = model.allreduce_time(size, n, 10**log_a, 10**log_b, algorithm="ring")
        params = {"n": n, "log_a": log_a, "log_b": log_b}
        rows = [{"log_s": s} for s in log_s]
        points += assert_twin(calcs, rows, params, "t", t)
        busbw = model.allreduce_busbw(size, n, t) / 1e9
        assert_twin(calcs, rows, params, "busbw_GBps", busbw)
    assert points >= 20


# ------------------------------------------------------------------ economics
def test_owned_cost_curve_and_break_even_are_the_economics_model():
    econ = cl.models.economics
    inputs = cl.models.breakeven.explorer_inputs(econ.cloud_price())
    spec = spec_of(cl.economics.chart.breakeven_explorer(inputs))
    owned, mark = calculates(spec["layer"][0]), calculates(spec["layer"][2])[:1]
    points = 0
    for price, capex, life, kwh in [
        (2.5, 25_000.0, 5.0, 0.10),
        (6.0, 55_000.0, 2.0, 0.35),
        (1.2, 12_000.0, 7.0, 0.04),
        (3.9, 31_500.0, 3.5, 0.2),
    ]:
        onprem = {"capex_per_gpu": capex, "lifetime_years": life, "price_per_kwh": kwh}
        params = {"cloud_price": price, "capex": capex, "life": life, "kwh": kwh}
        us = [0.05, 0.2, 0.37, 0.5, 0.81, 1.0]
        want = [econ.useful_hour_cost(u, **onprem) for u in us]
        rows = [{"u": u} for u in us]
        points += assert_twin(owned, rows, params, "cost", want)
        even = econ.breakeven_utilization(price, **onprem)
        if math.isfinite(even):
            assert_twin(mark, [{"i": 0}], params, "u", [even])
    assert points >= 20


# ------------------------------------------------------------------- roofline
def test_cores_line_is_the_utilisation_law():
    spec = spec_of(cl.roofline.chart.cores_chart())
    calcs = calculates(spec["layer"][0] if "layer" in spec else spec)
    points = 0
    for log_rate, util in [(5.3, 0.7), (3.0, 1.0), (6.8, 0.15), (4.15, 0.55)]:
        log_cost = [-7.0, -6.35, -5.5, -4.05, -3.2, -2.05]
        want = [
            cl.models.roofline.cores_needed(10**log_rate, 10**c, util) for c in log_cost
        ]
        params = {"log_rate": log_rate, "util": util}
        rows = [{"log_cost": c} for c in log_cost]
        points += assert_twin(calcs, rows, params, "cores", want)
    assert points >= 20


# ------------------------------------------------------------------- pipeline
def test_pipeline_explorer_ops_end_where_the_schedule_says():
    from clusterlab.models.pipeline_sweeps import schedule_sweep

    spec = spec_of(cl.pipeline.chart.pipeline_schedule_explorer(4, 8))
    layer = next(v for v in spec["layer"] if calculates(v))
    calcs = [c for c in calculates(layer) if c["as"] == "t1"]
    ops, _ = schedule_sweep(4, 8)
    points = 0
    for _key, g in list(ops.groupby("key", sort=False))[:3]:
        rows = [
            {"t": float(s), "f": int(ph == "bwd"), "v": int(v)}
            for s, ph, v in zip(g["start"], g["phase"], g["v"], strict=True)
        ]
        points += assert_twin(calcs, rows, {}, "t1", g["end"], rtol=1e-9)
    assert points >= 20
