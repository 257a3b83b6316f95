"""The decision helper: the source's workload table, its rules, and invariants."""

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

import clusterlab as cl
from clusterlab.models.decide import PRESETS, Hardware, job_speedup, recommend

# One H100 (datasheet) against one CPU core of 50 GFLOP/s and 5 GB/s, at $2.50
# per GPU-hour and $0.05 per core-hour.
HW = Hardware(989.4e12, 3.35e12, 80e9, 50e9, 5e9, 2.50, 0.05)

W1 = {  # the source's table (W1) and examples (F3, W4), and D3's mixed case
    "LLM training (70B)": "GPU cluster",
    "batch inference (70B)": "GPU cluster",
    "web serving": "distributed CPU",
    "data preprocessing": "distributed CPU",
    "real-time analytics": "distributed CPU",
    "key-value store (Redis)": "distributed CPU",
    "web crawler": "distributed CPU",
    "preprocessing + training": "both",
}


@pytest.mark.parametrize("name, choice", W1.items())
def test_the_presets_get_the_tables_answer(name, choice):
    assert recommend(PRESETS[name], HW)["choice"] == choice


def test_a_pure_dense_job_speeds_up_by_the_roofline_ratio():
    w = replace(PRESETS["LLM training (70B)"], dense_fraction=1.0, io_fraction=0.0)
    n = job_speedup(w, HW)
    assert n["job_speedup"] == pytest.approx(989.4e12 / 50e9)


def test_an_io_bound_job_is_capped_by_amdahl():
    w = replace(PRESETS["data preprocessing"], io_fraction=0.5)
    assert job_speedup(w, HW)["job_speedup"] < 2.0


def test_every_reason_names_a_rule():
    for w in PRESETS.values():
        for rule, text in recommend(w, HW)["reasons"]:
            assert rule in {"D1", "D2", "D3"} and text


def test_bad_traits_are_named():
    with pytest.raises(ValueError, match="dense_fraction"):
        job_speedup(replace(PRESETS["web serving"], dense_fraction=1.5), HW)


fractions = st.floats(0.0, 1.0)


@given(fractions, fractions, st.floats(1.0, 100.0))
def test_a_dearer_gpu_never_makes_the_gpu_cheaper(dense, io, factor):
    w = replace(PRESETS["LLM training (70B)"], dense_fraction=dense, io_fraction=io)
    dear = replace(HW, gpu_price_per_hour=HW.gpu_price_per_hour * factor)
    assert job_speedup(w, dear)["cost_ratio"] >= job_speedup(w, HW)["cost_ratio"]


@given(fractions, fractions, fractions)
def test_more_io_never_raises_the_speedup(dense, io1, io2):
    low, high = sorted((io1, io2))
    w = replace(PRESETS["batch inference (70B)"], dense_fraction=dense)
    assert job_speedup(replace(w, io_fraction=high), HW)["job_speedup"] <= job_speedup(
        replace(w, io_fraction=low), HW
    )["job_speedup"] * (1 + 1e-12)


def test_the_chart_has_a_workload_radio_and_the_reasons():
    df = cl.viz.decision_table(PRESETS.values(), HW)
    spec = cl.viz.decision_chart(df).to_dict()
    assert spec["params"][0]["bind"]["input"] == "radio"
    assert set(df["workload"]) == set(PRESETS)


def test_the_widget_follows_its_preset():
    box = cl.ui.decision_helper(HW, start="web serving")
    assert "distributed CPU" in box.children[-1].value
    box.children[0].value = "LLM training (70B)"
    assert "GPU cluster" in box.children[-1].value
    with pytest.raises(ValueError, match="start="):
        cl.ui.decision_helper(HW, start="nope")


def test_the_exercise_check(capsys):
    assert cl.check.cheaper_on_gpu(cl.solutions.cheaper_on_gpu) is True

    def stub(speedup, gpu_price, cpu_price):
        raise NotImplementedError

    assert cl.check.cheaper_on_gpu(stub) is False

    def faster_is_cheaper(speedup, gpu_price, cpu_price):
        return speedup > 1

    with pytest.raises(AssertionError, match="50x"):
        cl.check.cheaper_on_gpu(faster_is_cheaper)
