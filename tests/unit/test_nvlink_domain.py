"""The NVLink domain's size: 8 (a server) or 72 (an NVL72 rack) in the models.

A TP, EP or CP group that fits in the domain runs at the scale-up bandwidth;
one that does not crosses the network. With the same published figures, a
72-GPU domain keeps a TP of 16 or an EP of 32 on NVLink, and faster.
"""

import pytest

import clusterlab as cl

M = cl.models
P5 = M.planner5d
LLAMA = M.compute.LLAMA2_70B
TP16 = dict(
    tp=16, pp=4, dp=16, zero_stage=1, recompute="full", sequence_parallel=False,
    global_batch=512, micro_batch=2,
)  # fmt: skip


def test_scale_up_size_is_the_server_at_8_and_the_rack_at_72():
    coll = M.collectives
    assert coll.NVLINK_DOMAINS == (8, 72)
    assert coll.scale_up_size() == 8
    assert coll.scale_up_size(8, gpus_per_node=4) == 4  # NVLink ends at the server
    assert coll.scale_up_size(72, gpus_per_node=4) == 72
    assert coll.on_nvlink(16, 72) and not coll.on_nvlink(16, 8)
    assert coll.on_nvlink(72, 72) and not coll.on_nvlink(73, 72)


@pytest.mark.parametrize("bad", [16, 0, 64, "72", 72.5, True, None])
def test_a_domain_other_than_8_or_72_is_refused_by_name(bad):
    with pytest.raises(ValueError, match=r"nvlink_domain=.*\(8, 72\)"):
        M.collectives.scale_up_size(bad)
    with pytest.raises(ValueError, match="nvlink_domain="):
        P5.plan5d_row(LLAMA, **TP16, nvlink_domain=bad)
    with pytest.raises(ValueError, match="nvlink_domain="):
        M.interconnects.cluster_allreduce_time(1e9, "NDR400 InfiniBand", 2, 8, 8,
                                               nvlink_domain=bad)  # fmt: skip


def test_a_server_must_sit_inside_one_72_gpu_domain():
    with pytest.raises(ValueError, match="gpus_per_node=16 must divide"):
        M.collectives.scale_up_size(72, gpus_per_node=16)


def test_tp16_stays_on_nvlink_in_a_72_gpu_domain_and_is_faster():
    eight = P5.plan5d_row(LLAMA, **TP16)  # default: the 8-GPU server
    assert eight == P5.plan5d_row(LLAMA, **TP16, nvlink_domain=8)
    rack = P5.plan5d_row(LLAMA, **TP16, nvlink_domain=72)
    assert P5.placement(16, nvlink_domain=8)["tp"] == "network"
    assert P5.placement(16, nvlink_domain=72)["tp"] == "NVLink"
    # the same published NVLink sweep and network link in both
    msg = eight["tp_allreduce_bytes"]
    net = M.links.LINKS["NDR400 InfiniBand"]
    over_net = M.collectives.allreduce_time(msg, 16, net.alpha_s, net.effective_Bps)
    assert eight["tp_allreduce_s"] == pytest.approx(over_net)
    inside = M.collectives.allreduce_time_published(msg, 16, "8xH200-NVLS-nccl2.27.7")
    assert rack["tp_allreduce_s"] == pytest.approx(inside)
    assert rack["tp_comm_s"] < eight["tp_comm_s"] / 2
    assert rack["step_s"] < eight["step_s"]
    assert rack["memory_bytes"] == eight["memory_bytes"]  # only time changes
    assert (
        M.planner.plan_row(LLAMA, **TP16, nvlink_domain=72)["step_s"]
        == (rack["step_s"])
    )


def test_ep32_stays_on_nvlink_in_a_72_gpu_domain_and_is_faster():
    ds = P5.moe_shape()
    plan = P5.layout_plan(P5.published_layout("DeepSeek-V3 pre-training"))
    plan.update(ep=32, scale_up_link="NVLink 4")  # the H100's NVLink, not the H800's
    eight = P5.plan5d_row(ds, **plan)
    rack = P5.plan5d_row(ds, **plan, nvlink_domain=72)
    assert P5.placement(1, 1, 32, nvlink_domain=8)["ep"] == "NVLink + network"
    assert P5.placement(1, 1, 32, nvlink_domain=72)["ep"] == "NVLink"
    assert rack["ep_comm_s"] < eight["ep_comm_s"] / 2
    assert rack["step_s"] < eight["step_s"]
    # in the rack no byte of the all-to-all leaves NVLink
    one = M.moe.ep_layer_alltoall_s(
        1024, ds.hidden, ds.top_k, 32, 2, ranks_per_domain=72
    )
    assert one["network_bytes"] == 0 and one["network_s"] == 0


def test_cp_ring_beyond_the_server_stays_on_nvlink_in_the_rack():
    assert P5.placement(8, 4, nvlink_domain=8)["cp"] == "network"
    assert P5.placement(8, 4, nvlink_domain=72)["cp"] == "NVLink"
    plan = dict(TP16, tp=8, cp=4, pp=2, dp=16)
    eight = P5.plan5d_row(LLAMA, **plan)
    rack = P5.plan5d_row(LLAMA, **plan, nvlink_domain=72)
    # the ring's passes now take NVLink's published bus bandwidth at their size,
    # which for these small passes is not above the network's (the model's)
    assert rack["cp_comm_s"] != eight["cp_comm_s"]
    assert rack["tp_comm_s"] == eight["tp_comm_s"]  # TP 8 was inside already


def test_the_planner_search_moves_tp_into_the_rack():
    kw = dict(global_batch=512, micro_batch=1, tp_options=(8, 16),
              zero_stages=(1,), recompute_modes=("full",))  # fmt: skip
    p8 = M.planner.plan(LLAMA, 1024, **kw)
    p72 = M.planner.plan(LLAMA, 1024, **kw, nvlink_domain=72)
    tp16_8 = p8[p8.feasible & (p8.tp == 16)].tokens_per_s.max()
    tp16_72 = p72[p72.feasible & (p72.tp == 16)].tokens_per_s.max()
    assert tp16_72 > tp16_8
    # plans whose TP and PP stay inside 8 GPUs are the same in both
    key = ["tp", "pp", "dp", "sequence_parallel"]
    same = p8[p8.tp * p8.pp <= 8].sort_values(key).step_s.tolist()
    same72 = p72[p72.tp * p72.pp <= 8].sort_values(key).step_s.tolist()
    assert same and same == same72


def test_the_cluster_allreduce_groups_whole_nodes_inside_the_rack():
    ic = M.interconnects
    grads = 14e9
    eight = ic.cluster_allreduce_time(grads, "NDR400 InfiniBand", 16, 8, 8)
    assert eight == ic.cluster_allreduce_time(
        grads, "NDR400 InfiniBand", 16, 8, 8, nvlink_domain=8
    )
    rack = ic.cluster_allreduce_time(
        grads, "NDR400 InfiniBand", 16, 8, 8, nvlink_domain=72
    )
    # 128 GPUs in a 72-GPU domain: two groups of 64 (8 nodes), then the network
    inside = M.collectives.allreduce_time_published(grads, 64, ic.DEFAULT_INTRA)
    net = M.links.LINKS["NDR400 InfiniBand"]
    between = M.collectives.allreduce_time(
        grads / 64, 2, net.alpha_s, net.effective_Bps
    )
    assert rack == pytest.approx(inside + between)
    assert rack < eight
    # 9 nodes of 8 fill the rack: no network at all
    full = ic.cluster_allreduce_time(
        grads, "NDR400 InfiniBand", 9, 8, 8, nvlink_domain=72
    )
    assert full == pytest.approx(
        M.collectives.allreduce_time_published(grads, 72, ic.DEFAULT_INTRA)
    )


def test_domain_comparison_is_the_plan_at_each_domain():
    ds = P5.moe_shape()
    plan = P5.layout_plan(P5.published_layout("DeepSeek-V3 pre-training"))
    table = P5.domain_comparison(ds, plan).set_index("nvlink_domain")
    assert table.loc[8, "ep_on"] == "NVLink + network"
    assert table.loc[72, "ep_on"] == "NVLink"
    assert table.loc[8, "step_s"] == P5.plan5d_row(ds, **plan)["step_s"]
    assert table.loc[72, "tokens_per_s"] > table.loc[8, "tokens_per_s"]
    with pytest.raises(ValueError, match="nvlink_domain=36"):
        P5.domain_comparison(ds, plan, nvlink_domains=(8, 36))
