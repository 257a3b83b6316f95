"""Each explorer's live controls and its static twin's sliders show the same ranges.

An explorer shows a parameter twice, as an ipywidget and as a Vega parameter of
its static twin, both built from one spec of ``cl.core.controls``. These tests
build both for every explorer in ``EXPLORERS`` (those whose live control and
page input share a spec; the page inputs built otherwise are listed, with
their reasons, in ``test_control_bindings.py``), read the
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


def _whole(x: float) -> bool:
    return abs(x - round(x)) < 1e-9 * max(1.0, abs(x))


def _points_off_the_slider(name, live, options) -> list[str]:
    """The twin's radio options a live slider cannot reach (log sliders too)."""
    base = getattr(live, "base", None)  # a FloatLogSlider moves the exponent
    bad = []
    for v in options:
        if not isinstance(v, int | float) or (base is not None and v <= 0):
            bad.append(v)
            continue
        x = v if base is None else math.log(v, base)
        on_grid = _whole((x - live.min) / live.step)
        if not (live.min - 1e-9 <= x <= live.max + 1e-9 and on_grid):
            bad.append(v)
    if not options or bad:
        return [f"{name}: twin options {bad or options} off the live slider"]
    return []


def mismatches(widget, chart_spec: dict, pairs, narrowed=()) -> list[str]:
    """What differs between the live controls and the twin's sliders.

    Args:
        widget: the live explorer.
        chart_spec: its twin's ``to_dict()``.
        pairs: ``(live description, twin parameter name)`` per shared control.
        narrowed: twin parameters that may cover only part of the live control
            (the page carries a sweep): a slider's ends must lie on the live
            slider's grid, inside its ends, and its step be a multiple of the
            live step; a radio's options must be live options, in their order.

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
        if bind.get("input") != "range" and not hasattr(live, "options"):
            out += _points_off_the_slider(name, live, bind.get("options") or [])
            continue
        if bind.get("input") != "range":
            live_options = list(getattr(live, "_options_values", live.options))
            twin_options = bind.get("options")
            if name in narrowed:  # the twin's options, in the live order
                kept = [o for o in live_options if o in (twin_options or [])]
                if not twin_options or kept != twin_options:
                    out.append(
                        f"{name}: twin {twin_options} not among live {live_options}"
                    )
            elif live_options != twin_options:
                out.append(f"{name}: live {live_options}, twin {twin_options}")
            continue
        if any(
            not isinstance(bind.get(k), int | float) for k in ("min", "max", "step")
        ):
            out.append(f"{name}: twin range {bind} lacks min, max or step")
            continue
        if name not in narrowed:
            for key in ("min", "step", "max"):
                a, b = getattr(live, key), bind[key]
                if not math.isclose(a, b, abs_tol=1e-12):
                    out.append(f"{name}: live {key} {a}, twin {key} {b}")
            continue
        lo, hi, step = bind["min"], bind["max"], bind["step"]
        if lo < live.min - 1e-12 or hi > live.max + 1e-12:
            out.append(
                f"{name}: twin range [{lo}, {hi}] beyond live [{live.min}, {live.max}]"
            )
        if not _whole((lo - live.min) / live.step):
            out.append(f"{name}: twin min {lo} off the live grid (step {live.step})")
        if not _whole(step / live.step):
            out.append(f"{name}: twin step {step} not a multiple of live {live.step}")
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


def _fault_tolerance():
    return (
        cl.fault_tolerance.widget.goodput_explorer_widget(),
        cl.fault_tolerance.chart.goodput_explorer(),
    )


def _collectives():
    m = _measured()
    return (
        cl.collectives.widget.busbw_explorer(2e-5, 4e8, m),
        cl.collectives.chart.busbw_model_chart(2e-5, 4e8, m),
    )


def _data_parallel():
    sweep = cl.models.data_parallel.zero_memory_sweep()
    return (
        cl.data_parallel.widget.zero_memory_explorer(),
        cl.data_parallel.chart.zero_memory_chart(sweep),
    )


def _data_parallel_buckets():
    args = (0.05, 4e8, 2e-5, 1e9)  # backward s, gradient bytes, α s, β B/s
    return (
        cl.data_parallel.widget.bucket_explorer(*args),
        cl.data_parallel.chart.bucket_chart(
            cl.models.data_parallel.bucket_sweep(*args)
        ),
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


def _clocks():
    m = cl.clocks.sim
    base = m.ClockParams(duration_s=300.0)
    sweep = m.skew_sweep([1.0, 10.0, 100.0], [4.0, 16.0], base=base, bins=6)
    return (
        cl.clocks.widget.clock_skew_explorer(base),
        cl.clocks.chart.skew_explorer_chart(sweep),
    )


def _experts():
    return (
        cl.experts.widget.ep_alltoall_widget(),
        cl.experts.chart.ep_alltoall_chart(cl.models.moe.config_alltoall_sweep()),
    )


def _failures():
    m = cl.failures.sim
    grid = m.heartbeat_grid(m.HeartbeatParams(), [1.0, 2.0])
    return cl.failures.widget.heartbeat_widget(), cl.failures.chart.heartbeat_explorer(
        grid
    )


def _interconnects():
    sweep = cl.models.interconnects.interconnect_sweep(
        [7e9], [2**k for k in range(11, 14)], [1, 8]
    )
    return (
        cl.interconnects.widget.interconnect_calculator(),
        cl.interconnects.chart.step_time_chart(sweep),
    )


def _stragglers():
    return (
        cl.stragglers.widget.straggler_explorer(),
        cl.stragglers.chart.straggler_sweep_chart(
            cl.models.stragglers.step_time_sweep()
        ),
    )


def _tensor_parallel():
    sweep = cl.models.tensor_parallel.tp_cost_sweep()
    return (
        cl.tensor_parallel.widget.tp_cost_widget(),
        cl.tensor_parallel.chart.tp_cost_chart(sweep),
    )


def _pipeline():
    return (
        cl.pipeline.widget.pipeline_schedule_widget(),
        cl.pipeline.chart.pipeline_schedule_explorer(max_stages=4, max_microbatches=8),
    )


def _ring():
    return (
        cl.ring.widget.allreduce_algorithm_explorer(),
        cl.ring.chart.allreduce_model_chart(),
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
    "fault_tolerance": (
        _fault_tolerance,
        [
            ("GPU MTBF (h)", "gpu_mtbf_h"),
            ("checkpoint (s)", "ckpt_s"),
            ("restart (s)", "restart_s"),
            ("recovery (s)", "recovery_s"),
            ("groups", "n_groups"),
        ],
        (),
    ),
    # the page moves between the sweep's points (log10 ppm, log2 s)
    "clocks": (
        _clocks,
        [
            ("largest drift (ppm)", "log_drift"),
            ("sync interval (s)", "log_interval"),
            ("protocol", "protocol"),
        ],
        ("log_drift", "log_interval", "protocol"),
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
    "data_parallel": (_data_parallel, [("ZeRO stage", "stage")], ("stage",)),
    # the page's radios offer the sweep's cases of the live sliders
    "data_parallel_buckets": (
        _data_parallel_buckets,
        [("ranks", "ranks"), ("backward ×", "scale")],
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
    # the page offers the sweep's models and token counts
    "experts": (
        _experts,
        [("model", "moe_model"), ("tokens/rank", "moe_tokens")],
        ("moe_model", "moe_tokens"),
    ),
    # the page moves between the grid's points
    "failures": (
        _failures,
        [("jitter (ms)", "jitter_ms"), ("loss (%)", "loss_pct")],
        ("jitter_ms", "loss_pct"),
    ),
    # the page moves between the sweep's token counts
    "interconnects": (
        _interconnects,
        [("log2 tok/GPU", "log2_tok"), ("NICs/node", "nics")],
        ("log2_tok",),
    ),
    "planner": (_planner, [("GB per GPU", "gpu_mem_GB")], ()),
    # the page carries every simulated case of p <= 4 and m <= 8
    "pipeline": (
        _pipeline,
        [("stages p", "p"), ("micro-batches m", "m")],
        ("p", "m"),
    ),
    "precision": (_precision, [("log2 scale", "log2_scale")], ()),
    # Lab 05's all-reduce algorithms: the page computes the models in Vega
    "ring": (
        _ring,
        [("α (s)", "log_alpha"), ("B (B/s)", "log_bw"), ("log2 bytes", "log2_bytes")],
        (),
    ),
    # the page offers the sweep's distributions (not "none")
    "stragglers": (
        _stragglers,
        [("noise", "jitter_pick"), ("cv", "cv_pick"), ("× slower", "slow_pick")],
        ("jitter_pick",),
    ),
    # the page offers the sweep's models
    "tensor_parallel": (_tensor_parallel, [("model", "tp_model")], ("tp_model",)),
}


@pytest.fixture(scope="module")
def built():
    return {name: make() for name, (make, _, _) in EXPLORERS.items()}


@pytest.mark.parametrize("name", sorted(EXPLORERS))
def test_live_controls_and_twin_sliders_agree(built, name):
    widget, chart = built[name]
    _, pairs, narrowed = EXPLORERS[name]
    assert mismatches(widget, chart.to_dict(), pairs, narrowed) == []


def _planted(chart, param, **bind):
    spec = copy.deepcopy(chart.to_dict())
    twin_params(spec)[param]["bind"].update(bind)
    return spec


@pytest.mark.parametrize("name", sorted(EXPLORERS))
def test_a_planted_mismatch_is_found(built, name):
    widget, chart = built[name]
    _, pairs, narrowed = EXPLORERS[name]
    for description, param in pairs:
        live = live_control(widget, description)
        bind = twin_params(chart.to_dict())[param]["bind"]

        def found(spec, what, param=param):
            return any(
                f"{param}: {what}" in m
                for m in mismatches(widget, spec, pairs, narrowed)
            )

        if bind["input"] != "range" and not hasattr(live, "options"):
            top = (
                live.max if getattr(live, "base", None) is None else live.base**live.max
            )
            for stray in (top * 2, bind["options"][0] + live.step / 3):
                assert found(
                    _planted(chart, param, options=[*bind["options"], stray]), ""
                )
            continue
        if bind["input"] != "range":  # an option the live control lacks, or order
            stray = _planted(chart, param, options=[*bind["options"], "stray"])
            assert found(stray, "")
            if len(bind["options"]) > 1:
                turned = _planted(chart, param, options=bind["options"][::-1])
                assert found(turned, "")
            continue
        if param in narrowed:  # the page's slider beyond, off the grid, too fine
            assert found(_planted(chart, param, max=live.max + live.step), "twin range")
            assert found(
                _planted(chart, param, min=bind["min"] + live.step / 2), "twin min"
            )
            assert found(_planted(chart, param, step=live.step * 1.5), "twin step")
            continue
        assert found(_planted(chart, param, min=bind["min"] - live.step), "live min")
        assert found(_planted(chart, param, step=bind["step"] * 2), "live step")
        old = live.max
        live.max = old + live.step  # the live slider drifts
        try:
            assert found(chart.to_dict(), "live max")
        finally:
            live.max = old


def test_the_clock_protocols_of_the_spec_are_the_simulation_s():
    assert cl.clocks.chart.PROTOCOL.options == cl.clocks.sim.PROTOCOLS


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
