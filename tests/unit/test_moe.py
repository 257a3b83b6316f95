"""Mixture of experts: the all-to-all cost model, capacity, the busiest expert."""

import math
from pathlib import Path

import pytest

import clusterlab as cl
from clusterlab.models import moe
from clusterlab.models.links import LINKS


def test_dispatch_bytes_count_only_copies_bound_for_other_ranks():
    # 4096 tokens x top-8 x 7168 values x 2 B, 7 of 8 ranks elsewhere.
    got = moe.alltoall_bytes_per_rank(4096, 7168, 8, 8, 2)
    assert got == 4096 * 8 * 7168 * 2 * 7 / 8
    assert moe.alltoall_bytes_per_rank(4096, 7168, 8, 1, 2) == 0
    assert moe.alltoall_bytes_per_rank(0, 16, 2, 4, 4) == 0


def test_alltoall_time_is_alpha_beta():
    assert moe.alltoall_time_s(1e9, 8, 1e11, 1e-5) == pytest.approx(7e-5 + 1e-2)
    assert moe.alltoall_time_s(0, 1, 1e11, 1e-5) == 0


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: moe.alltoall_bytes_per_rank(-1, 8, 2, 4, 2), "tokens_per_rank=-1"),
        (lambda: moe.alltoall_bytes_per_rank(8, 8, 0, 4, 2), "top_k=0"),
        (lambda: moe.alltoall_bytes_per_rank(8, 8, 2, 0, 2), "ep=0"),
        (lambda: moe.alltoall_bytes_per_rank(8, 8, 2, 4, 0), "bytes_per_value=0"),
        (lambda: moe.alltoall_time_s(1e6, 4, 0, 1e-6), "bandwidth_Bps=0"),
        (lambda: moe.alltoall_time_s(1e6, 4, 1e9, -1), "latency_s=-1"),
        (lambda: moe.expert_capacity(8, 4, 5, 1.0), "top_k=5"),
        (lambda: moe.expert_capacity(8, 4, 2, 0), "capacity_factor=0"),
        (lambda: moe.busiest_expert_load(2, 8, 1), "tokens=2"),
    ],
)
def test_bad_arguments_are_named(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_inside_nvlink_uses_nvlink_and_across_mostly_the_network():
    nv, ib = LINKS["NVLink 4"], LINKS["NDR400 InfiniBand"]
    inside = moe.ep_layer_alltoall_s(4096, 7168, 8, 8, 2)
    want = moe.alltoall_time_s(
        inside["bytes_per_rank"], 8, nv.effective_Bps, nv.alpha_s
    )
    assert inside["network_bytes"] == 0
    assert inside["layer_s"] == pytest.approx(2 * want)
    across = moe.ep_layer_alltoall_s(4096, 7168, 8, 64, 2)
    assert across["network_bytes"] / across["bytes_per_rank"] == pytest.approx(56 / 63)
    net = moe.alltoall_time_s(across["network_bytes"], 57, ib.effective_Bps, ib.alpha_s)
    assert across["layer_s"] == pytest.approx(2 * net)
    assert across["layer_s"] > 5 * inside["layer_s"]


def test_config_sweep_reads_the_published_rows():
    df = moe.config_alltoall_sweep(tokens_per_rank=(1024,))
    mixtral = df[df.model == "Mixtral 8x7B"]
    assert list(mixtral.ep) == [2, 4, 8]  # only what divides 8 experts
    ds = cl.published.row("moe_configs", model="DeepSeek-V3")
    row = df[(df.model == "DeepSeek-V3") & (df.ep == 16)].iloc[0]
    assert row.bytes_per_rank == moe.alltoall_bytes_per_rank(
        1024, int(ds.hidden), int(ds.top_k), 16, 2
    )
    assert set(df.placement) == {"inside NVLink", "across the network"}


def test_published_configs_have_their_columns_and_sources():
    df = cl.published.load("moe_configs")
    need = "model,n_layers,hidden,n_experts,top_k,n_shared_experts,expert_ffn_hidden"
    need += ",params_total,params_active,source,source_key,source_date"
    assert set(need.split(",")) <= set(df.columns)
    ds = df.set_index("model").loc["DeepSeek-V3"]
    assert (ds.n_experts, ds.top_k, ds.hidden, ds.n_shared_experts) == (256, 8, 7168, 1)
    assert (df.params_active < df.params_total).all()
    bib = (Path(__file__).resolve().parents[2] / "references.bib").read_text()
    assert all(f"{{{k}," in bib for k in df.source_key)


def test_capacity_rounds_up_and_counts_copies():
    assert moe.expert_capacity(64, 8, 2, 1.25) == 20
    assert moe.expert_capacity(10, 4, 1, 1.0) == 3
    assert moe.expert_capacity(0, 4, 1, 1.0) == 0


def test_busiest_expert_grows_with_experts_and_is_the_straggler_maximum():
    loads = [moe.busiest_expert_load(1024, e, 2)["imbalance"] for e in (4, 16, 64)]
    assert 1 < loads[0] < loads[1] < loads[2]
    one = moe.busiest_expert_load(1024, 8, 2)
    want = cl.models.stragglers.expected_step_time(8, one["mean_load"], cv=one["cv"])
    assert one["max_load"] == want
    assert one["cv"] == pytest.approx(math.sqrt((1 - 2 / 8) / 256))


def test_sampled_loads_conserve_tokens():
    loads = cl.experts.sim.routing_loads(100, 8, 2, n_draws=5, seed=1)
    assert loads.shape == (5, 8) and (loads.sum(axis=1) == 200).all()
    one = cl.experts.sim.routing_loads(100, 8, 1, n_draws=5, seed=1)
    assert (one.sum(axis=1) == 100).all()
