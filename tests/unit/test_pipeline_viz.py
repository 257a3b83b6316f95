"""Pipeline charts and Lab 11's widget: what they draw and how they refuse input."""

import json

import pandas as pd
import pytest

import clusterlab as cl
import widget_helpers as wh
from clusterlab.models.pipeline import simulate_schedule


def _layers(spec):
    return spec.get("layer", [])


def test_gantt_carries_every_pass_and_names_its_axes():
    df = simulate_schedule(4, 8, "gpipe")
    idle = cl.models.pipeline.simulated_bubble(df)
    spec = cl.pipeline.chart.pipeline_gantt(
        df, time_scale=1e3, time_label="time (ms)", idle_fraction=idle
    ).to_dict()
    (values,) = [d for d in spec["datasets"].values()]
    assert len(values) == 2 * 4 * 8
    bars = _layers(spec)[0]
    assert bars["encoding"]["x"]["title"] == "time (ms)"
    assert bars["encoding"]["y"]["title"] == "pipeline stage (rank)"
    assert "27%" in spec["title"]["subtitle"]  # (4 - 1) / (8 + 4 - 1)
    # The cached layers are reused, not shared: another chart keeps its own data.
    other = cl.pipeline.chart.pipeline_gantt(simulate_schedule(2, 1, "gpipe")).to_dict()
    assert len(next(iter(other["datasets"].values()))) == 4


def test_gantt_refuses_a_table_without_times():
    with pytest.raises(ValueError, match="start"):
        cl.pipeline.chart.pipeline_gantt(pd.DataFrame({"stage": [0]}))


def test_bubble_chart_draws_the_formula_under_the_points():
    df = pd.DataFrame(
        {"microbatches": [1, 4], "schedule": ["1f1b"] * 2, "bubble": [0.8, 0.45]}
    )
    curve = cl.models.pipeline_sweeps.bubble_curve(4, 4)
    spec = cl.pipeline.chart.pipeline_bubble_chart(df, curve).to_dict()
    drawn = [v for v in spec["datasets"].values() if len(v) == 4][0]
    assert drawn[0]["bubble"] == pytest.approx(0.75)
    assert "p = 4" in spec["title"]["text"]
    with pytest.raises(ValueError, match="stages=0"):
        cl.models.pipeline_sweeps.bubble_curve(0, 4)
    with pytest.raises(ValueError, match="curve lacks"):
        cl.pipeline.chart.pipeline_bubble_chart(df, curve.drop(columns="stages"))


def test_explorer_has_working_controls_and_every_case():
    spec = cl.pipeline.chart.pipeline_schedule_explorer(
        max_stages=4, max_microbatches=4
    )
    spec = spec.to_dict()
    names = {p["name"]: p for p in spec["params"]}
    assert set(names) == {"sched", "p", "m"}
    assert names["sched"]["bind"]["input"] == "radio"
    assert names["p"]["bind"]["max"] == 4
    data = lambda layer: json.loads(spec["datasets"][layer["data"]["name"]])  # noqa: E731
    cases = data(_layers(spec)[0])
    # GPipe and 1F1B for p in 2..4, m in 1..4; interleaving only where p | m.
    assert len(cases) == 2 * 3 * 4 + 4  # (2, 2), (2, 4), (3, 3), (4, 4)
    notes = data(_layers(spec)[2])
    assert len(notes) == 3 * 3 * 4
    one = next(c for c in cases if c["k"] == "GPipe|4|4")
    assert (
        len(one["t"]) == 2 * 4 * 4 and max(one["t"]) == 19
    )  # ends at 3 (m + p - 1) = 21
    with pytest.raises(ValueError, match="max_stages=9"):
        cl.pipeline.chart.pipeline_schedule_explorer(max_stages=9)


def test_widget_redraws_and_explains_a_bad_choice():
    box = cl.pipeline.widget.pipeline_schedule_widget(stages=4, microbatches=8)
    assert "27.3%" in wh.text(box) and "held by one stage: 4" in wh.text(box)
    wh.control(box, "chunks v").value = 2
    assert "27.3%" not in wh.text(box)  # 1F1B, p = 4, m = 8, v = 2
    assert "15.8%" in wh.text(box)  # (4 - 1) / (2 * 8 + 4 - 1)
    wh.control(box, "micro-batches m").value = 7
    assert "multiple of p" in wh.text(box)
    with pytest.raises(ValueError, match="stages=1"):
        cl.pipeline.widget.pipeline_schedule_widget(stages=1)


def test_tp_cost_sweep_grows_with_degree_and_jumps_across_nodes():
    df = cl.models.tensor_parallel.tp_cost_sweep(models=("Llama 2 7B",))
    share = df.set_index("tp")["tp_share"]
    assert share[1] == 0.0
    assert share.is_monotonic_increasing
    comm = df.set_index("tp")["tp_comm_s"]
    assert comm[16] > 5 * comm[8]  # NVLink inside a node, InfiniBand across
    with pytest.raises(ValueError, match="tp=3 must divide"):
        cl.models.tensor_parallel.tp_cost_sweep(tp_values=(3,))
    with pytest.raises(ValueError, match="model='GPT-9'"):
        cl.models.tensor_parallel.tp_cost_sweep(models=("GPT-9",))
    assert not hasattr(cl.tensor_parallel.chart, "tp_cost_sweep")  # viz only draws


def test_tp_cost_chart_and_widget():
    df = cl.models.tensor_parallel.tp_cost_sweep()
    spec = cl.tensor_parallel.chart.tp_cost_chart(df).to_dict()
    assert spec["params"][0]["bind"]["input"] == "radio"
    assert len(spec["params"][0]["bind"]["options"]) == 3
    box = cl.tensor_parallel.widget.tp_cost_widget()
    assert "TP 8" in wh.text(box)
    with pytest.raises(ValueError, match="model='x'"):
        cl.tensor_parallel.widget.tp_cost_widget("x")
    with pytest.raises(ValueError, match="tp_share"):
        cl.tensor_parallel.chart.tp_cost_chart(df.drop(columns="tp_share"))
