"""Each explorer's live controls and its static twin's sliders show the same ranges.

An explorer shows a parameter twice, as an ipywidget and as a Vega parameter of
its static twin, both built from one spec of ``cl.core.controls``. These tests
build both for every explorer that shares a parameter with its twin, read the
widget's ``min``/``max``/``step`` (or ``options``) and the twin's
``params[*].bind`` from ``chart.to_dict()``, and compare them: they hold the
built objects to each other, not the spec to itself. A planted mismatch, on
either side, must fail the same comparison.
"""

from __future__ import annotations

import copy
import math

import pandas as pd
import pytest

import clusterlab as cl
from widget_helpers import walk

ipywidgets = pytest.importorskip("ipywidgets")


# ---------------------------------------------------------------- the harness
def twin_params(spec: dict) -> dict[str, dict]:
    """Every bound parameter of a chart's spec, at any depth, by name."""
    found = {}

    def visit(node):
        if isinstance(node, dict):
            for p in node.get("params", []):
                if isinstance(p, dict) and "bind" in p:
                    found[p["name"]] = p
            for v in node.values():
                visit(v)
        elif isinstance(node, list):
            for v in node:
                visit(v)

    visit(spec)
    return found


def live_control(widget, description: str):
    """The one value control of ``widget`` with this description."""
    found = [
        c
        for c in walk(widget)
        if isinstance(c, ipywidgets.ValueWidget)
        and getattr(c, "description", None) == description
    ]
    assert len(found) == 1, f"{len(found)} live controls named {description!r}"
    return found[0]


def mismatches(widget, chart_spec: dict, pairs, narrowed=()) -> list[str]:
    """What differs between the live controls and the twin's sliders.

    Args:
        widget: the live explorer.
        chart_spec: its twin's ``to_dict()``.
        pairs: ``(live description, twin parameter name)`` per shared control.
        narrowed: twin parameters whose slider may stop short of the live one's
            ``max`` (the page carries a sweep that ends there).

    Returns:
        One sentence per difference; empty when the two agree.
    """
    params = twin_params(chart_spec)
    out = []
    for description, name in pairs:
        live = live_control(widget, description)
        if name not in params:
            out.append(f"the twin has no slider {name!r} for {description!r}")
            continue
        bind = params[name]["bind"]
        if bind.get("input") == "range":
            for key in ("min", "step", "max"):
                a, b = getattr(live, key), bind.get(key)
                if key == "max" and name in narrowed:
                    if b is None or b > a:
                        out.append(f"{name}: twin max {b} beyond live max {a}")
                elif b is None or not math.isclose(a, b, abs_tol=1e-12):
                    out.append(f"{name}: live {key} {a}, twin {key} {b}")
        else:
            live_options = list(getattr(live, "_options_values", live.options))
            if live_options != bind.get("options"):
                out.append(f"{name}: live {live_options}, twin {bind.get('options')}")
    return out


# ------------------------------------------------------------- the explorers
def _measured():
    sizes = [2**k for k in range(10, 24, 4)]
    return pd.DataFrame({"size_bytes": sizes, "busbw_Bps": [1e8] * len(sizes)})


def _checkpointing():
    return (
        cl.checkpointing.widget.goodput_widget(),
        cl.checkpointing.chart.goodput_explorer(),
    )


def _collectives():
    m = _measured()
    return (
        cl.collectives.widget.busbw_explorer(2e-5, 4e8, m),
        cl.collectives.chart.busbw_model_chart(2e-5, 4e8, m),
    )


def _economics():
    inputs = cl.models.breakeven.explorer_inputs(cl.models.economics.cloud_price())
    return (
        cl.economics.widget.economics_explorer(),
        cl.economics.chart.breakeven_explorer(inputs),
    )


def _planner():
    shape, gpus, batch = cl.planner.widget.PLANNER_MODELS["Llama 2 7B"]
    plans = cl.models.planner5d.plan5d(shape, gpus, global_batch=batch)
    sweep = cl.planner.chart.planner_sweep(plans, f"Llama 2 7B on {gpus} GPUs")
    return cl.planner.widget.planner_widget(), cl.planner.chart.planner_explorer(sweep)


def _pipeline():
    return (
        cl.pipeline.widget.pipeline_schedule_widget(),
        cl.pipeline.chart.pipeline_schedule_explorer(max_stages=4, max_microbatches=8),
    )


def _precision():
    g = [1e-6, 1e-3, 0.5]
    m = cl.models.precision
    return (
        cl.precision.widget.loss_scale_widget(g),
        cl.precision.chart.loss_scale_chart(m.format_ranges(), m.log2_histogram(g)),
    )


# name: (build both, [(live description, twin param)], twin params narrowed)
EXPLORERS = {
    "checkpointing": (
        _checkpointing,
        [
            ("log2 GPUs", "log2_gpus"),
            ("GPU MTBF (h)", "gpu_mtbf_h"),
            ("checkpoint (s)", "ckpt_s"),
            ("restart (s)", "restart_s"),
        ],
        (),
    ),
    "collectives": (
        _collectives,
        [
            ("world size n", "n"),
            ("log10 α (s)", "log_a"),
            ("log10 β (B/s)", "log_b"),
        ],
        (),
    ),
    "economics": (
        _economics,
        [
            ("cloud $/GPU-h", "cloud_price"),
            ("server $/GPU", "capex"),
            ("lifetime (years)", "life"),
            ("$ per kWh", "kwh"),
        ],
        (),
    ),
    "planner": (_planner, [("GB per GPU", "gpu_mem_GB")], ()),
    # the page carries every simulated case of p <= 4 and m <= 8
    "pipeline": (
        _pipeline,
        [("stages p", "p"), ("micro-batches m", "m")],
        ("p", "m"),
    ),
    "precision": (_precision, [("log2 scale", "log2_scale")], ()),
}


@pytest.fixture(scope="module")
def built():
    return {name: make() for name, (make, _, _) in EXPLORERS.items()}


@pytest.mark.parametrize("name", sorted(EXPLORERS))
def test_live_controls_and_twin_sliders_agree(built, name):
    widget, chart = built[name]
    _, pairs, narrowed = EXPLORERS[name]
    assert mismatches(widget, chart.to_dict(), pairs, narrowed) == []


@pytest.mark.parametrize("name", sorted(EXPLORERS))
def test_a_planted_mismatch_is_found(built, name):
    widget, chart = built[name]
    _, pairs, narrowed = EXPLORERS[name]
    description, param = pairs[0]
    spec = copy.deepcopy(chart.to_dict())
    twin_params(spec)[param]["bind"]["min"] -= 1  # the page's slider drifts
    assert any(
        f"{param}: live min" in m for m in mismatches(widget, spec, pairs, narrowed)
    )
    live = live_control(widget, description)
    old = live.max
    live.max = old + live.step  # the live slider drifts
    try:
        found = mismatches(widget, chart.to_dict(), pairs, narrowed)
    finally:
        live.max = old
    if param in narrowed:  # a longer live slider is allowed; a longer twin is not
        spec = copy.deepcopy(chart.to_dict())
        twin_params(spec)[param]["bind"]["max"] = old + live.step
        found = mismatches(widget, spec, pairs, narrowed)
        assert any(f"{param}: twin max" in m for m in found)
    else:
        assert any(f"{param}: live max" in m for m in found)


def test_a_choice_mismatch_is_found():
    choice = cl.core.controls.Choice("pick", options=(1, 2), default=1, label="pick ")
    live = choice.widget()
    spec = {"params": [choice.param().param.to_dict()]}
    box = ipywidgets.VBox([live])
    assert mismatches(box, spec, [("pick", "pick")]) == []
    spec["params"][0]["bind"]["options"] = [1, 2, 3]
    assert mismatches(box, spec, [("pick", "pick")]) == [
        "pick: live [1, 2], twin [1, 2, 3]"
    ]
    assert mismatches(box, {"params": []}, [("pick", "pick")]) == [
        "the twin has no slider 'pick' for 'pick'"
    ]
