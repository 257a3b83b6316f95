"""Published bus bandwidth as a function of message size (models.collectives)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import clusterlab as cl
from clusterlab.models.collectives import allreduce_time_published, bus_bandwidth

SYSTEMS = cl.published.collective_systems()
NAMES = list(SYSTEMS["system"])
SWEEPS = list(SYSTEMS.loc[SYSTEMS["points"] >= 2, "system"])
PUB = cl.published.load("collective_busbw_published")
POINTS = PUB[(PUB["op"] == "all_reduce") & PUB["size_bytes"].notna()]
MiB, GiB = 2**20, 2**30
H200 = "8xH200-NVLS-nccl2.27.7"


def test_the_listing_names_gpu_node_size_algorithm_and_version():
    cols = {"system", "gpu", "n_gpus", "gpus_per_node", "algorithm", "nccl_version"}
    assert cols <= set(SYSTEMS.columns)
    row = SYSTEMS.set_index("system").loc[H200]
    assert (row["gpu"], row["n_gpus"], row["nccl_version"]) == ("H200 SXM", 8, "2.27.7")
    assert row["algorithm"] == "ring, NVLS"  # ring LL up to 1 MiB, then NVLS
    assert SYSTEMS["system"].is_unique and len(SYSTEMS) >= 10


@pytest.mark.parametrize("row", list(POINTS.itertuples()), ids=lambda r: r.system)
def test_exact_at_every_published_point(row):
    got = bus_bandwidth(row.size_bytes, row.system)
    assert got == pytest.approx(row.busbw_Bps, rel=0.05)


def test_the_issues_figures_by_name():
    assert bus_bandwidth(16 * GiB, H200) == pytest.approx(482.26e9, rel=1e-9)
    assert bus_bandwidth(32 * MiB, H200) == pytest.approx(275.84e9, rel=1e-9)
    assert bus_bandwidth(64 * MiB, H200) == pytest.approx(346.51e9, rel=1e-9)
    ring = bus_bandwidth(16 * GiB, "8xH200-ring-nccl2.27.7")
    assert ring == pytest.approx(367.61e9)
    efa = bus_bandwidth(4 * GiB, "32xH200-EFA-ring-nccl2.27.7")
    assert efa == pytest.approx(364.65e9)


@pytest.mark.parametrize("system", SWEEPS)
def test_monotone_between_neighbouring_points(system):
    pts = POINTS[POINTS["system"] == system].sort_values("size_bytes")
    s, b = pts["size_bytes"].to_numpy(), pts["busbw_Bps"].to_numpy()
    for lo, hi, b_lo, b_hi in zip(s[:-1], s[1:], b[:-1], b[1:], strict=True):
        grid = np.geomspace(lo, hi, 17)
        got = bus_bandwidth(grid, system)
        step = np.diff(got) * np.sign(b_hi - b_lo)
        assert (step >= -1e-6 * b_hi).all()
        assert got.min() >= min(b_lo, b_hi) * (1 - 1e-9)
        assert got.max() <= max(b_lo, b_hi) * (1 + 1e-9)


@pytest.mark.parametrize("system", NAMES)
def test_above_the_largest_size_is_the_plateau(system):
    top = POINTS[POINTS["system"] == system].sort_values("size_bytes").iloc[-1]
    far = bus_bandwidth(np.array([2, 100]) * top.size_bytes, system)
    assert far == pytest.approx([top.busbw_Bps] * 2)


@pytest.mark.parametrize("system", SWEEPS)
def test_below_the_smallest_size_falls_toward_zero(system):
    pts = POINTS[POINTS["system"] == system].sort_values("size_bytes")
    s1, b1 = pts["size_bytes"].iloc[0], pts["busbw_Bps"].iloc[0]
    small = bus_bandwidth(s1 * np.array([1e-6, 1e-3, 0.1, 0.5, 1.0]), system)
    assert (np.diff(small) > 0).all() and small[-1] == pytest.approx(b1)
    assert small[0] < 1e-3 * b1
    # the time never falls below zero and never exceeds the smallest point's
    t = allreduce_time_published(s1 * np.array([1e-3, 1.0]), 8, system)
    assert 0 < t[0] <= t[1] * (1 + 1e-9)
    assert bus_bandwidth(0, system) == 0.0


def test_the_fitted_alpha_beta_curve_passes_through_both_smallest_points():
    # 8 x H100: 150 GB/s at 58 MB and 370 GB/s at 10 GB give B S / (S + h).
    b1, b2, s1, s2 = 150e9, 370e9, 5.8e7, 1e10
    h = (b2 - b1) / (b1 / s1 - b2 / s2)
    big_b = b1 * (s1 + h) / s1
    got = bus_bandwidth(1e7, "8xH100-scalingbook")
    assert got == pytest.approx(big_b * 1e7 / (1e7 + h))


def test_one_point_systems_refuse_smaller_messages():
    with pytest.raises(ValueError, match="one size only"):
        bus_bandwidth(1e6, "32xH200-EFA-ring-nccl2.27.7")


@pytest.mark.parametrize(
    "args, match",
    [
        ((1e6, "8xH200"), "choose one of"),
        ((-1, H200), "nbytes=-1"),
        ((float("nan"), H200), "nbytes=nan"),
        ((1e6, "8xH200-peer-copy-nvbandwidth"), "system="),
    ],
)
def test_bad_arguments_name_themselves(args, match):
    with pytest.raises(ValueError, match=match):
        bus_bandwidth(*args)


def test_unknown_system_lists_the_names():
    with pytest.raises(ValueError) as err:
        bus_bandwidth(1e6, "Token Ring")
    assert H200 in str(err.value) and "8xA100-nccltests" in str(err.value)


def test_planner_facing_time_inverts_busbw():
    s = 100e6
    t = allreduce_time_published(s, 8, H200)
    assert t == pytest.approx(2 * 7 / 8 * s / bus_bandwidth(s, H200))
    assert allreduce_time_published(s, 1, H200) == 0.0
    out = allreduce_time_published(np.array([0.0, 32 * MiB]), 8, H200)
    assert out.shape == (2,) and out[0] == 0.0
    with pytest.raises(ValueError, match="n=0"):
        allreduce_time_published(s, 0, H200)


def test_a_plateau_only_model_fails_the_32_mib_point():
    """The check that decides 'size matters' can fail: a constant model does."""

    def plateau(nbytes, system):
        return POINTS[POINTS["system"] == system]["busbw_Bps"].max() + 0 * nbytes

    row = POINTS[(POINTS["system"] == H200) & (POINTS["size_bytes"] == 32 * MiB)]
    want = row["busbw_Bps"].iloc[0]
    assert plateau(32 * MiB, H200) != pytest.approx(want, rel=0.05)
    assert bus_bandwidth(32 * MiB, H200) == pytest.approx(want, rel=0.05)


@given(a=st.floats(1.0, 1e12), b=st.floats(1.0, 1e12))
def test_larger_messages_never_get_less_busbw_on_the_h200_sweep(a, b):
    lo, hi = sorted((a, b))
    assert bus_bandwidth(lo, H200) <= bus_bandwidth(hi, H200) * (1 + 1e-12)


def test_the_size_chart_draws_the_sweep_and_checks_its_columns():
    sweeps = cl.models.allreduce_sweeps
    df = sweeps.busbw_size_sweep([H200, "8xA100-nccltests"])
    assert set(df["kind"]) == {"published", "interpolated"}
    spec = cl.collectives.chart.busbw_size_chart(df).to_dict()
    assert "log" in str(spec) and "GB/s" in str(spec)
    with pytest.raises(ValueError, match="lacks"):
        cl.collectives.chart.busbw_size_chart(df.drop(columns="kind"))
    with pytest.raises(ValueError, match="two or more"):
        sweeps.busbw_size_sweep(["32xH200-EFA-ring-nccl2.27.7"])
    tops = sweeps.largest_size_points()
    assert tops["system"].is_unique
    assert "GB/s" in str(cl.collectives.chart.published_busbw_chart(tops).to_dict())
