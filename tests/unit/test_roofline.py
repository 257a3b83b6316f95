"""The roofline model, its measurements, charts, widgets and exercise checks."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import clusterlab as cl
import widget_helpers as wh
from clusterlab.models import roofline as rl

_H100 = cl.published.row("gpu_specs", part="H100 SXM5")
H100_PEAK, H100_BW = float(_H100["bf16_dense_flops"]), float(_H100["hbm_bandwidth_Bps"])


def test_hand_cases_of_the_roofline():
    # below the ridge: bandwidth times intensity; above: the peak
    assert rl.attainable_flops(1.0, H100_PEAK, H100_BW) == pytest.approx(H100_BW)
    assert rl.attainable_flops(1000.0, H100_PEAK, H100_BW) == pytest.approx(H100_PEAK)
    assert rl.ridge_intensity(H100_PEAK, H100_BW) == pytest.approx(295.3, rel=1e-3)
    np.testing.assert_allclose(
        rl.attainable_flops([0.5, 4.0, 8.0], 40.0, 10.0), [5.0, 40.0, 40.0]
    )
    assert rl.roofline_bound(10.0, H100_PEAK, H100_BW) == "memory"
    assert rl.roofline_bound(400.0, H100_PEAK, H100_BW) == "compute"


@given(
    intensity=st.floats(1e-4, 1e5),
    peak=st.floats(1e6, 1e16),
    bw=st.floats(1e6, 1e14),
)
def test_attainable_never_exceeds_either_roof(intensity, peak, bw):
    att = rl.attainable_flops(intensity, peak, bw)
    assert att <= peak * (1 + 1e-12)
    assert att <= intensity * bw * (1 + 1e-12)
    assert att == pytest.approx(min(peak, intensity * bw))


@given(i1=st.floats(1e-3, 1e4), factor=st.floats(1.0, 100.0))
def test_more_intensity_never_runs_slower(i1, factor):
    assert rl.attainable_flops(i1 * factor, 1e12, 1e10) >= rl.attainable_flops(
        i1, 1e12, 1e10
    )


def test_matmul_intensity_by_hand():
    # square fp32 n=1024: 2n^3 / (4 * 3 n^2) = n / 6
    assert rl.matmul_intensity(1024, 1024, 1024, 4) == pytest.approx(1024 / 6)
    # matrix-vector in bf16 stays near 1 FLOP/byte
    assert rl.matmul_intensity(1, 8192, 8192, 2) == pytest.approx(1.0, rel=1e-3)
    assert rl.matmul_intensity(4096, 8192, 8192, 2) == pytest.approx(2048.0)


def test_cores_needed_by_hand():
    # 200K events/s at 10 µs each is 2 core-seconds per second; at 70%: 2.86 -> 3
    assert rl.cores_needed(200_000, 10e-6, 0.7) == 3
    assert rl.cores_needed(200_000, 10e-6, 1.0) == 2  # exactly 2, no float spill
    assert rl.cores_needed(200_000, 1e-3, 0.7) == 286
    assert rl.cores_needed(1, 1e-9) == 1


@given(
    rate=st.floats(1.0, 1e7),
    cost=st.floats(1e-9, 1e-1),
    util=st.floats(0.05, 1.0),
)
def test_cores_keep_utilisation_at_or_below_target(rate, cost, util):
    cores = rl.cores_needed(rate, cost, util)
    assert rate * cost / cores <= util * (1 + 1e-6)
    assert cores == 1 or rate * cost / (cores - 1) > util * (1 - 1e-6)


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda: rl.attainable_flops(0, 1e12, 1e10), "intensity=0"),
        (lambda: rl.attainable_flops(1, -1, 1e10), "peak_flops=-1"),
        (lambda: rl.attainable_flops(1, 1e12, 0), "bandwidth_Bps=0"),
        (lambda: rl.attainable_flops("x", 1e12, 1e10), "intensity='x'"),
        (lambda: rl.matmul_intensity(0, 1, 1), "m=0"),
        (lambda: rl.matmul_intensity(1, 1, 1, 3.5), "bytes_per_element=3.5"),
        (lambda: rl.cores_needed(0, 1e-6), "events_per_s=0"),
        (lambda: rl.cores_needed(1, -1e-6), "cost_s_per_event=-1e-06"),
        (lambda: rl.cores_needed(1, 1e-6, 1.5), "utilisation=1.5"),
        (lambda: rl.cores_needed(1, 1e-6, 0), "utilisation=0"),
    ],
)
def test_bad_input_names_the_argument(call, needle):
    with pytest.raises(ValueError, match=None) as info:
        call()
    assert needle in str(info.value)


def test_workload_table_orders_training_far_right():
    wl = rl.workload_table()
    assert list(wl.columns) == [
        "workload",
        "kernel",
        "intensity_flop_per_byte",
        "derivation",
        "limited_by",
    ]
    i = wl.set_index("workload")["intensity_flop_per_byte"]
    ridge = rl.ridge_intensity(H100_PEAK, H100_BW)
    assert i["LLM training"] > ridge  # compute-bound on an H100
    assert (i.drop("LLM training") < ridge).all()  # the rest are memory-bound


def test_measurements_return_positive_rates():
    mm = cl.roofline.measure.measure_matmul_flops([64, 128], repeats=2)
    assert list(mm["n"]) == [64, 128] and (mm["flop_per_s"] > 1e7).all()
    assert mm["flop"].tolist() == [2 * 64**3, 2 * 128**3]
    st_ = cl.roofline.measure.measure_stream_bandwidth([2**16, 2**20], repeats=2)
    assert (st_["bw_Bps"] > 1e7).all()
    assert st_["bytes_moved"].tolist() == [2 * 2**16, 2 * 2**20]


@pytest.mark.timing
def test_matmul_is_faster_per_flop_than_a_copy_per_byte():
    """A wrong FLOP count (n² instead of 2n³) would put the matmul below the copy."""
    mm = cl.roofline.measure.measure_matmul_flops([256], repeats=3)["flop_per_s"].max()
    bw = cl.roofline.measure.measure_stream_bandwidth([2**26], repeats=3)[
        "bw_Bps"
    ].max()
    # A 256 matmul does 2 * 256 = 512 FLOP per element it touches, a copy none.
    # Quiet, FLOP/s is above bytes/s; with another test worker on the same two
    # cores one run measured 2.2 GFLOP/s against 6.9 GB/s (0.32). An n**2 FLOP
    # count would be 512x lower (about 0.0006), far below the bound.
    assert mm / bw > 0.02, (mm, bw)


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda: cl.roofline.measure.measure_matmul_flops([8]), "sizes[0]=8"),
        (
            lambda: cl.roofline.measure.measure_matmul_flops(dtype="int8"),
            "dtype='int8'",
        ),
        (
            lambda: cl.roofline.measure.measure_stream_bandwidth([10]),
            "sizes_bytes[0]=10",
        ),
        (
            lambda: cl.roofline.measure.measure_stream_bandwidth(device="tpu"),
            "device='tpu'",
        ),
        (lambda: cl.roofline.measure.measure_cost_per_item(None, [1]), "fn=None"),
        (lambda: cl.roofline.measure.measure_cost_per_item(len, []), "items=[]"),
    ],
)
def test_measurement_arguments_are_checked(call, needle):
    with pytest.raises(ValueError) as info:
        call()
    assert needle in str(info.value)


def test_holdout_recovers_an_exact_model():
    sizes = [2**k for k in range(4, 20)]
    df = pd.DataFrame({"size_bytes": sizes, "time_s": [1e-4 + s / 2e9 for s in sizes]})
    held = cl.core.alpha_beta.alpha_beta_holdout(df)
    assert len(held) == 8 and (held["rel_error"] < 1e-9).all()
    assert held.attrs["alpha_s"] == pytest.approx(1e-4)
    assert held.attrs["beta_Bps"] == pytest.approx(2e9)
    with pytest.raises(ValueError, match="at least 4"):
        cl.core.alpha_beta.alpha_beta_holdout(df.head(3))


def _machines():
    return pd.DataFrame(
        {
            "machine": ["cpu", "H100 SXM5"],
            "peak_flops": [1e11, H100_PEAK],
            "bandwidth_Bps": [1e10, H100_BW],
        }
    )


def test_charts_have_titles_units_and_page_controls():
    v = cl.collectives.chart
    wl = rl.workload_table()
    roof = cl.roofline.chart.roofline_chart(_machines(), wl).to_dict()
    assert "FLOP/s" in str(roof) and "radio" in str(roof["params"])
    busbw = v.busbw_model_chart(1e-4, 1e9).to_dict()
    assert {p["name"] for p in busbw["params"]} == {"n", "log_a", "log_b"}
    assert all("bind" in p for p in busbw["params"])
    fixed = v.busbw_model_chart(1e-4, 1e9, interactive=False).to_dict()
    assert not any("bind" in p for p in fixed["params"])
    links = v.link_rates_chart(cl.published.load("interconnect_rates")).to_dict()
    assert "GB/s" in str(links) and "radio" in str(links["params"])
    assert "x2" in links["encoding"]  # bars on a log axis need a start above zero
    cores = cl.roofline.chart.cores_chart().to_dict()
    assert "sliders" not in str(cores)  # slider names are units
    pub = cl.published.load("collective_busbw_published")
    measured = pd.DataFrame(
        {"op": ["all_reduce"], "size_bytes": [2**20], "busbw_Bps": [1e9]}
    )
    assert "log" in str(v.busbw_vs_published_chart(measured, pub).to_dict())
    assert "GB/s" in str(v.published_busbw_chart(pub).to_dict())


def test_roofline_points_say_which_roof_binds():
    pts = cl.roofline.chart.roofline_points(_machines(), rl.workload_table())
    h100 = pts[pts["machine"] == "H100 SXM5"].set_index("workload")
    assert h100.at["LLM training", "bound"] == "compute"
    assert h100.at["LLM training", "attainable_flops"] == pytest.approx(H100_PEAK)
    assert h100.at["real-time analytics", "bound"] == "memory"


def test_published_data_names_unknown_tables():
    with pytest.raises(ValueError, match="name='nope'"):
        cl.published.load("nope")


@pytest.mark.timing
@pytest.mark.parametrize("which", ["roofline", "busbw"])
def test_widget_updates_in_under_200_ms(which):
    if which == "roofline":
        box = cl.roofline.widget.roofline_explorer(_machines(), rl.workload_table())
    else:
        df = pd.DataFrame({"size_bytes": [2**10, 2**20], "busbw_Bps": [1e7, 1e9]})
        box = cl.collectives.widget.busbw_explorer(1e-4, 1e9, df)
    best = min(wh.seconds(box.update) for _ in range(3))
    assert best < 0.2, f"{which} widget update took {best * 1e3:.0f} ms"


def test_checks_pass_the_solutions(capsys):
    assert (
        cl.collectives.check.busbw_from_algbw(cl.collectives.answer.busbw_from_algbw)
        is True
    )
    assert (
        cl.roofline.check.matmul_intensity(cl.roofline.answer.matmul_intensity) is True
    )
    assert capsys.readouterr().out.count("\u2714") == 2


def test_checks_say_not_attempted_for_stubs(capsys):
    def stub(*args):
        raise NotImplementedError

    assert cl.collectives.check.busbw_from_algbw(stub) is False
    assert cl.roofline.check.matmul_intensity(stub) is False
    assert capsys.readouterr().out.count("not attempted") == 2


def test_checks_catch_wrong_answers_with_hints():
    def one_pass_factor(op, algbw, n):  # forgets that all-reduce moves data twice
        return algbw * (n - 1) / n

    with pytest.raises(AssertionError, match="reduce-scatter then an all-gather"):
        cl.collectives.check.busbw_from_algbw(one_pass_factor)

    def half_the_flops(m, n, k, b):  # counts a multiply-add as one FLOP
        return m * n * k / (b * (m * k + k * n + m * n))

    with pytest.raises(AssertionError, match="2·m·n·k"):
        cl.roofline.check.matmul_intensity(half_the_flops)

    def only_inputs(m, n, k, b):  # forgets the output matrix
        return 2 * m * n * k / (b * (m * k + k * n))

    with pytest.raises(AssertionError, match="m·k \\+ k·n \\+ m·n"):
        cl.roofline.check.matmul_intensity(only_inputs)
    with pytest.raises(ValueError, match="fn=None"):
        cl.roofline.check.matmul_intensity(None)
