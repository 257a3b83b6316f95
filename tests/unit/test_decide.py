"""The decision helper: the source's workload table, its rules, and invariants."""

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

import clusterlab as cl
import widget_helpers as wh
from clusterlab.models.decide import (
    PRESETS,
    Hardware,
    decision_table,
    job_speedup,
    recommend,
    reference_hardware,
)

# One H100 (datasheet row) against one CPU core (assumption row), at the
# reference on-demand price and the assumed core-hour price, all from data/.
HW = reference_hardware()
SPEC = cl.published.row("gpu_specs", part="H100 SXM5")
CORE = cl.published.row("cpu_core", item="server_core_assumed")

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
    assert n["job_speedup"] == pytest.approx(
        SPEC["bf16_dense_flops"] / CORE["peak_flops"]
    )


def test_an_io_bound_job_is_capped_by_amdahl():
    w = replace(PRESETS["data preprocessing"], io_fraction=0.5)
    assert job_speedup(w, HW)["job_speedup"] < 2.0


def test_the_reference_hardware_is_read_from_data():
    assert HW.gpu_peak_flops == SPEC["bf16_dense_flops"]
    assert HW.gpu_memory_bytes == SPEC["hbm_bytes"]
    assert HW.gpu_price_per_hour == cl.models.economics.cloud_price()
    assert HW.cpu_price_per_hour == cl.published.value(
        "prices", "usd", item="cpu_core_hour"
    )
    mine = reference_hardware(cpu_peak_flops=1e10, cpu_price_per_hour=0.1)
    assert (mine.cpu_peak_flops, mine.cpu_price_per_hour) == (1e10, 0.1)
    assert isinstance(mine, Hardware)


@pytest.mark.parametrize("name, choice", W1.items())
def test_the_table_answers_hold_at_the_cheapest_and_dearest_cloud_price(name, choice):
    prices = cl.models.economics.cloud_prices()["usd"]
    for p in (prices.min(), prices.max()):
        hw = reference_hardware(gpu_price_per_hour=float(p))
        assert recommend(PRESETS[name], hw)["choice"] == choice, p


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
    df = decision_table(PRESETS.values(), HW)
    spec = cl.decide.chart.decision_chart(df).to_dict()
    assert spec["params"][0]["bind"]["input"] == "radio"
    assert set(df["workload"]) == set(PRESETS)
    with pytest.raises(ValueError, match="lacks the column"):
        cl.decide.chart.decision_chart(df.drop(columns="reason"))


def test_the_widget_follows_its_preset():
    box = cl.decide.widget.decision_helper(HW, start="web serving")
    assert "distributed CPU" in wh.text(box)
    wh.control(box, "start from").value = "LLM training (70B)"
    assert "GPU cluster" in wh.text(box)
    with pytest.raises(ValueError, match="start="):
        cl.decide.widget.decision_helper(HW, start="nope")
    assert "GPU cluster" in wh.text(cl.decide.widget.decision_helper())


def test_the_exercise_check(capsys):
    assert cl.decide.check.cheaper_on_gpu(cl.decide.answer.cheaper_on_gpu) is True

    def stub(speedup, gpu_price, cpu_price):
        raise NotImplementedError

    assert cl.decide.check.cheaper_on_gpu(stub) is False

    def faster_is_cheaper(speedup, gpu_price, cpu_price):
        return speedup > 1

    with pytest.raises(AssertionError, match="50x"):
        cl.decide.check.cheaper_on_gpu(faster_is_cheaper)
