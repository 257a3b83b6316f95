"""Data-parallel charts, widgets and the bucket-overlap model behind them."""

import json

import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import clusterlab as cl
import widget_helpers as wh
from clusterlab.models.collectives import allreduce_time


@settings(max_examples=60, deadline=None)
@given(
    backward_s=st.floats(0, 1),
    grad_bytes=st.floats(0, 1e10),
    n=st.integers(1, 256),
    buckets=st.integers(1, 64),
)
@example(backward_s=1.0, grad_bytes=5e-324, n=2, buckets=2)  # buckets round to 0 B
def test_bucket_overlap_never_beats_its_bounds(backward_s, grad_bytes, n, buckets):
    alpha_s, bw = 1e-5, 1e10
    t = cl.models.data_parallel.bucket_overlap_time(
        backward_s, grad_bytes, n, alpha_s, bw, buckets
    )
    last = allreduce_time(grad_bytes / buckets, n, alpha_s, bw)
    # done no earlier than the backward pass, nor than the last bucket after it
    assert t["done_s"] >= backward_s + last - 1e-12
    assert t["done_s"] >= t["comm_s"] - 1e-12
    assert t["done_s"] <= backward_s + t["comm_s"] + 1e-12
    assert t["exposed_s"] >= -1e-12


def test_one_bucket_hides_nothing_and_many_pay_latency():
    one = cl.models.data_parallel.bucket_overlap_time(0.2, 3e8, 8, 5e-6, 45e9, 1)
    assert one["exposed_s"] == pytest.approx(one["comm_s"])
    eight = cl.models.data_parallel.bucket_overlap_time(0.2, 3e8, 8, 5e-6, 45e9, 8)
    assert eight["done_s"] < one["done_s"]  # overlap wins on a compute-heavy step
    latency_bound = cl.models.data_parallel.bucket_overlap_time(
        1e-4, 1e3, 8, 1e-3, 45e9, 8
    )
    assert (
        latency_bound["done_s"]
        > cl.models.data_parallel.bucket_overlap_time(1e-4, 1e3, 8, 1e-3, 45e9, 1)[
            "done_s"
        ]
    )
    with pytest.raises(ValueError, match="buckets=0"):
        cl.models.data_parallel.bucket_overlap_time(0.1, 1e6, 2, 1e-5, 1e9, 0)


def test_zero_sweep_matches_the_sixteen_bytes_rule():
    df = cl.models.data_parallel.zero_memory_sweep([1e9], dp_list=[1, 8], stages=[0, 3])
    total = df.groupby(["dp", "zero_stage"])["bytes"].sum()
    assert total[(1, 0)] == pytest.approx(16e9)
    assert total[(8, 0)] == pytest.approx(16e9)
    assert total[(8, 3)] == pytest.approx(2e9)


def _params(chart):
    spec = chart.to_dict()
    return {
        p["name"]
        for layer in [spec, *spec.get("layer", [])]
        for p in layer.get("params", [])
    }


def test_static_twins_have_their_radio_buttons():
    sweep = cl.models.data_parallel.bucket_sweep(1e-3, 8e5, 5e-4, 3e9)
    assert {"ranks", "scale"} <= _params(cl.data_parallel.chart.bucket_chart(sweep))
    zero = cl.models.data_parallel.zero_memory_sweep()
    spec = cl.data_parallel.chart.zero_memory_chart(zero).to_dict()
    assert {"stage", "model"} <= _params(cl.data_parallel.chart.zero_memory_chart(zero))
    assert "80 GB" in json.dumps(spec["title"])


def test_step_and_fsdp_charts_have_units():
    step = pd.DataFrame(
        {
            "world_size": [1, 1],
            "mode": ["hand"] * 2,
            "part": ["a", "b"],
            "seconds": [1e-3, 2e-3],
        }
    )
    spec = json.dumps(cl.data_parallel.chart.dp_step_chart(step).to_dict())
    assert "(ms)" in spec
    table = pd.DataFrame(
        {
            "world_size": [1, 2],
            "kind": ["total"] * 2,
            "measured_bytes": [16.0, 8.0],
            "formula_bytes": [16.0, 8.0],
        }
    )
    assert "(MB, log scale)" in json.dumps(
        cl.data_parallel.chart.fsdp_memory_chart(table).to_dict()
    )
    with pytest.raises(ValueError, match="lacks the column"):
        cl.data_parallel.chart.dp_step_chart(step.drop(columns="part"))


@pytest.mark.parametrize(
    "make, name, values",
    [
        (
            lambda: cl.data_parallel.widget.zero_memory_explorer(),
            "parameters",
            (70e9, 1e9, 7e9),
        ),
        (
            lambda: cl.data_parallel.widget.bucket_explorer(1e-3, 8e5, 5e-4, 3e9),
            "ranks",
            (8, 16, 2),
        ),
    ],
    ids=["zero", "bucket"],
)
@pytest.mark.timing
def test_widgets_update_within_200_ms(make, name, values):
    box = make()
    slider = wh.control(box, name)
    before, best = wh.text(box), float("inf")
    for value in values:  # best of three
        best = min(best, wh.seconds(lambda v=value: setattr(slider, "value", v)))
        if value == values[0]:
            assert wh.text(box) != before, "the widget did not redraw"
    assert best < 0.2, f"a widget update took {best * 1e3:.0f} ms (budget 200 ms)"


def test_fsdp_bytes_check_against_solution_stub_and_wrong_answers(capsys):
    assert (
        cl.data_parallel.check.fsdp_bytes_per_rank(
            cl.data_parallel.answer.fsdp_bytes_per_rank
        )
        is True
    )
    assert "\u2714 fsdp_bytes_per_rank" in capsys.readouterr().out

    def stub(n_params, world_size, zero_stage):
        raise NotImplementedError

    assert cl.data_parallel.check.fsdp_bytes_per_rank(stub) is False
    with pytest.raises(AssertionError, match="not everything is sharded"):
        cl.data_parallel.check.fsdp_bytes_per_rank(lambda n, w, s: 16 * n / w)
    with pytest.raises(AssertionError, match="divided by world_size"):
        cl.data_parallel.check.fsdp_bytes_per_rank(lambda n, w, s: 16 * n)
    with pytest.raises(AssertionError, match="Adam's moments"):
        cl.data_parallel.check.fsdp_bytes_per_rank(lambda n, w, s: 18 * n / w)
