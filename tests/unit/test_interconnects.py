"""Interconnect and step-time model: hand cases, claims arithmetic, invariants."""

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

import clusterlab as cl
import widget_helpers as wh
from clusterlab.models import contention, links
from clusterlab.models import interconnects as ic
from clusterlab.models.allreduce_sweeps import allreduce_model_sweep

H200 = "8xH200-NVLS-nccl2.27.7"


def test_line_rates_are_the_published_ones():
    assert links.LINKS["100GbE TCP"].per_direction_Bps == 12.5e9
    assert links.LINKS["NDR400 InfiniBand"].per_direction_Bps == 50e9
    assert links.LINKS["NVLink 4"].per_direction_Bps == 450e9
    assert all(lk.source for lk in links.LINKS.values())


def test_every_assumption_is_one_data_row():
    rows = cl.published.load("link_assumptions").set_index("link")
    assert set(rows.index) == set(links.LINKS)
    assert rows["source"].str.len().gt(20).all()
    # one InfiniBand efficiency, the planner's and the step model's alike
    assert (
        links.LINKS["NDR400 InfiniBand"].efficiency
        == rows.at["NDR400 InfiniBand", "efficiency_fraction"]
    )
    assert links.LINKS["NDR400 InfiniBand"].effective_Bps == pytest.approx(40e9)
    # NVLink's is derived from the published ring on 8 x H200 (367.61 of 450)
    assert links.LINKS["NVLink 4"].efficiency == pytest.approx(367.61 / 450)
    assert links.LINKS is links.LINKS


def test_the_intra_node_part_is_size_aware():
    # One node: the all-reduce is the published system's at the gradient's size.
    big, small = 16 * 2**30, 32 * 2**20
    for size in (big, small):
        t = ic.cluster_allreduce_time(size, "NDR400 InfiniBand", 1, 8, intra=H200)
        bw = cl.models.collectives.bus_bandwidth(size, H200)
        assert t == pytest.approx(1.75 * size / bw)
    # a 32 MiB all-reduce gets far less than the 16 GiB plateau
    assert cl.models.collectives.bus_bandwidth(small, H200) < 0.6 * 482.26e9
    with pytest.raises(ValueError, match="choose one of"):
        ic.cluster_allreduce_time(1e9, "NDR400 InfiniBand", 2, intra="8xH999")


def test_defaults_come_from_the_data():
    assert ic.h100_peak_flops() == 989.4e12
    assert ic.default_mfu() == pytest.approx(0.40)
    df = ic.interconnect_sweep([7e9], [4096], [1], links=("NDR400 InfiniBand",))
    want = ic.compute_time(7e9, 4096, ic.h100_peak_flops(), ic.default_mfu())
    assert df["compute_s"].iloc[0] == pytest.approx(want)


def test_assumptions_are_editable_and_validated():
    slow = links.link("100GbE TCP", efficiency=0.5)
    assert slow.effective_Bps == pytest.approx(6.25e9)
    assert links.LINKS["100GbE TCP"].efficiency == 0.60  # the table is untouched
    with pytest.raises(ValueError, match="efficiency=1.5"):
        links.link("NVLink 4", efficiency=1.5)
    with pytest.raises(ValueError, match="name='Token Ring'"):
        links.link("Token Ring")


def test_cluster_allreduce_by_hand():
    lossless = dict(efficiency=1.0, alpha_s=0.0)
    net = links.link("NDR400 InfiniBand", **lossless)
    nv = links.link("NVLink 4", **lossless)
    # 2 nodes x 8 GPUs, 1 NIC each, 16 GB: NVLink ring 1.75 * 16e9 / 450e9,
    # then 2 GB per GPU across 2 nodes at 50/8 GB/s: 1 * 2e9 / 6.25e9.
    t = ic.cluster_allreduce_time(16e9, net, 2, 8, 1, intra=nv)
    assert t == pytest.approx(1.75 * 16e9 / 450e9 + 2e9 / 6.25e9)
    # 8 NICs give each GPU its own port: the network part is 8x shorter.
    t8 = ic.cluster_allreduce_time(16e9, net, 2, 8, 8, intra=nv)
    assert t8 == pytest.approx(1.75 * 16e9 / 450e9 + 2e9 / 50e9)
    # One node never touches the network.
    one = ic.cluster_allreduce_time(16e9, "100GbE TCP", 1, 8, 1, intra=nv)
    assert one == pytest.approx(1.75 * 16e9 / 450e9)


def test_ndr_against_100gbe_at_line_rate_is_a_75_percent_cut():
    kw = dict(efficiency=1.0, alpha_s=0.0)
    inf_nv = dataclasses.replace(links.LINKS["NVLink 4"], line_rate_bps=1e30, alpha_s=0)
    eth = ic.cluster_allreduce_time(
        1e9, links.link("100GbE RoCE", **kw), 4, 8, 1, inf_nv
    )
    ndr = ic.cluster_allreduce_time(
        1e9, links.link("NDR400 InfiniBand", **kw), 4, 8, 1, inf_nv
    )
    assert 1 - ndr / eth == pytest.approx(0.75)


def test_compute_and_step_time_by_hand():
    # 6 * 1e9 params * 1000 tokens / (1e15 FLOP/s * 0.5) = 12 ms.
    assert ic.compute_time(1e9, 1000, 1e15, 0.5) == pytest.approx(0.012)
    assert ic.step_time(1.0, 0.5) == 1.5
    assert ic.step_time(1.0, 0.5, overlap=0.6) == 1.0  # fully hidden
    assert ic.step_time(1.0, 2.0, overlap=0.5) == pytest.approx(2.5)
    with pytest.raises(ValueError, match="overlap=1.5"):
        ic.step_time(1.0, 1.0, overlap=1.5)


def test_the_model_sweep_takes_its_grid_from_the_link_rows():
    df = allreduce_model_sweep(log2_sizes=(20,), gpus=(8, 64))
    alphas = sorted({lk.alpha_s * 1e6 for lk in links.LINKS.values()})
    assert sorted(df["alpha_us"].unique()) == pytest.approx(alphas)
    assert df["bandwidth_GBps"].max() == pytest.approx(50.0)  # one NDR port
    assert set(df["algorithm"]) == {"ring", "tree", "hierarchical"}


def test_the_claims_arithmetic():
    # H3 with E5: 78% less all-reduce and 3x overall need 85.5% exposed comm.
    assert ic.comm_share_needed(0.78, 3.0) == pytest.approx((2 / 3) / 0.78)
    # S6: a fully network-bound step losing 40% of bandwidth loses 40%.
    assert contention.contention_drop(1.0, 0.4) == pytest.approx(0.4)
    assert contention.contention_drop(0.0, 0.9) == 0.0
    assert contention.network_share_for_drop(0.4, 0.5) == pytest.approx(2 / 3)
    f = contention.network_share_for_drop(0.4, 0.7)
    assert contention.contention_drop(f, 0.7) == pytest.approx(0.4)


def test_mixed_gpus_run_at_the_slowest_pace():
    out = contention.mixed_cluster_throughput([64, 64], [0.6, 1.0])
    assert out["synchronous"] == pytest.approx(128 * 0.6)
    assert out["balanced"] == pytest.approx(64 * 1.6)
    assert out["lost_share"] == pytest.approx(0.25)
    assert out["idle_share_fastest"] == pytest.approx(0.4)
    with pytest.raises(ValueError, match="same length"):
        contention.mixed_cluster_throughput([1, 2], [1.0])


def test_the_sweep_is_tidy():
    df = ic.interconnect_sweep([7e9], [4096, 8192], [1, 8])
    assert len(df) == 4 * 1 * 2 * 2
    assert (df["step_s"] >= df["compute_s"]).all()
    assert df["comm_share"].between(0, 1).all()
    assert cl.models.links.LINKS is links.LINKS


@given(
    grad=st.floats(1e3, 1e12),
    nodes=st.integers(1, 512),
    nics=st.integers(1, 8),
    compute=st.floats(0, 100),
    overlap=st.floats(0, 1),
    eff=st.floats(0.05, 1.0),
    factor=st.floats(1.0, 50.0),
    name=st.sampled_from(list(links.LINKS)),
)
def test_more_bandwidth_never_lengthens_a_step(
    grad, nodes, nics, compute, overlap, eff, factor, name
):
    base = links.link(name, efficiency=eff / factor if factor > 1 else eff)
    faster = links.link(name, efficiency=base.efficiency * factor)
    slow = ic.cluster_allreduce_time(grad, base, nodes, 8, nics)
    fast = ic.cluster_allreduce_time(grad, faster, nodes, 8, nics)
    assert fast <= slow * (1 + 1e-12)
    assert ic.step_time(compute, fast, overlap) <= ic.step_time(
        compute, slow, overlap
    ) * (1 + 1e-12)


@given(f=st.floats(0, 1), c1=st.floats(0, 0.95), c2=st.floats(0, 0.95))
def test_more_stolen_bandwidth_never_helps(f, c1, c2):
    lo, hi = sorted((c1, c2))
    assert (
        contention.contention_drop(f, lo) <= contention.contention_drop(f, hi) + 1e-12
    )


def test_network_charts_carry_their_controls():
    spec = cl.ring.chart.allreduce_algorithms_chart(allreduce_model_sweep()).to_dict()
    names = {p["name"] for p in spec["params"]}
    assert {"alpha_us", "bw_GBps", "log2_bytes"} <= names
    sweep = ic.interconnect_sweep([7e9, 70e9], [4096, 8192], [1, 8])
    spec = cl.interconnects.chart.step_time_chart(sweep).to_dict()
    assert {"model_B", "nics", "log2_tok"} <= {p["name"] for p in spec["params"]}
    assert (
        "params"
        not in cl.interconnects.chart.step_time_chart(sweep, controls=False).to_dict()
    )
    assert cl.interconnects.chart.contention_chart(
        contention.contention_sweep()
    ).to_dict()["layer"]
    with pytest.raises(ValueError, match="lacks"):
        cl.interconnects.chart.contention_chart(sweep)
    with pytest.raises(ValueError, match="lacks"):
        cl.ring.chart.ring_timing_chart(sweep)


def test_network_widgets_build_and_redraw(capsys):
    calc = cl.interconnects.widget.interconnect_calculator()
    before = wh.text(calc)
    assert "H3 says 78%" in before
    wh.control(calc, "NICs/node").value = 8  # eight NICs per node
    after = wh.text(calc)
    assert after != before, "moving the NIC slider changed nothing the reader sees"
    assert "H3 says 78%" in after
    algo = cl.ring.widget.allreduce_algorithm_explorer()
    capsys.readouterr()
    wh.control(algo, "log2 bytes").value = 20
    # outside a kernel the widget's Output prints what it redraws
    assert "Chart" in capsys.readouterr().out, "moving the size slider redrew nothing"
