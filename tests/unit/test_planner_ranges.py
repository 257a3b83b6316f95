"""The TP curve and overlap in the planner, and claims H6 and L2 as ranges."""

import pytest

import clusterlab as cl
from clusterlab.models import collectives as C
from clusterlab.models import planner_comm as PC
from clusterlab.models import planner_ranges as PR
from clusterlab.models.compute import LLAMA2_70B
from clusterlab.planner import check

RECIPE = cl.models.recipes.ESSAY_70B
MiB = 2**20
RECIPE_PLAN = dict(
    tp=8, pp=4, dp=32, zero_stage=1, recompute="full", sequence_parallel=False,
    global_batch=512, micro_batch=2,
)  # fmt: skip


def test_the_default_curve_is_the_generation_matched_sweep():
    assert PC.DEFAULT_INTRA_NODE_SYSTEM == "8xH200-NVLS-nccl2.27.7"
    assert cl.models.interconnects.DEFAULT_INTRA == PC.DEFAULT_INTRA_NODE_SYSTEM
    # the Scaling Book pair is about half the H200 sweep at TP's sizes
    for size in (32 * MiB, 64 * MiB, 128 * MiB):
        low = C.bus_bandwidth(size, PC.PESSIMISTIC_INTRA_NODE_SYSTEM)
        assert low < 0.6 * C.bus_bandwidth(size, PC.DEFAULT_INTRA_NODE_SYSTEM)


def test_the_ring_curve_has_the_h200_plateau_on_the_a100_shape():
    plateau, shape = PC.SP_RING
    big = 16 * 2**30
    assert C.ring_bus_bandwidth(big, plateau, shape) == pytest.approx(3.6761e11)
    frac = C.bus_bandwidth(32 * MiB, shape) / C.bus_bandwidth(big, shape)
    got = C.ring_bus_bandwidth(32 * MiB, plateau, shape)
    assert got == pytest.approx(frac * 3.6761e11)
    with pytest.raises(ValueError, match="shape_system='8xH100-scalingbook'"):
        C.ring_bus_bandwidth(MiB, plateau, "8xH100-scalingbook")


def test_sequence_parallel_pairs_run_on_the_ring_and_cost_more_than_nvls():
    for size in (32 * MiB, 64 * MiB, 128 * MiB):
        nvls = PC.tp_allreduce_s(size, 8)
        sp = PC.tp_allreduce_s(size, 8, sequence_parallel=True)
        ring = C.ring_bus_bandwidth(size, *PC.SP_RING)
        assert sp == pytest.approx(2 * 7 / 8 * size / ring)
        assert sp > 1.2 * nvls  # NVLS adds in the switch; RS and AG cannot gain
    # beyond the NVLink domain both cross the network alike
    assert PC.tp_allreduce_s(64 * MiB, 16, sequence_parallel=True) == pytest.approx(
        PC.tp_allreduce_s(64 * MiB, 16)
    )
    row = cl.models.planner.plan_row(
        LLAMA2_70B, **(RECIPE_PLAN | {"sequence_parallel": True})
    )
    assert row["tp_allreduce_s"] == pytest.approx(
        PC.tp_allreduce_s(row["tp_allreduce_bytes"], 8, sequence_parallel=True)
    )


def test_tp_overlap_hides_tp_traffic_and_no_more_than_the_compute():
    none = cl.models.planner.plan_row(LLAMA2_70B, **RECIPE_PLAN)
    half = cl.models.planner.plan_row(LLAMA2_70B, **RECIPE_PLAN, tp_overlap=0.5)
    assert half["tp_comm_s"] == pytest.approx(none["tp_comm_s"] / 2)
    assert half["step_s"] < none["step_s"]
    assert half["memory_bytes"] == none["memory_bytes"]
    # short sequences make the TP traffic exceed the compute: the excess stays
    short = dict(RECIPE_PLAN, pp=1, dp=128, micro_batch=1, seq_len=512)
    over = cl.models.planner5d.plan5d_row(
        LLAMA2_70B, **short, intra_node_system="8xA100-nccltests", tp_overlap=1.0
    )
    assert over["tp_comm_total_s"] > over["compute_s"]
    assert over["tp_comm_s"] == pytest.approx(
        over["tp_comm_total_s"] - over["compute_s"]
    )
    with pytest.raises(ValueError, match="tp_overlap=1.5"):
        cl.models.planner.plan_row(LLAMA2_70B, **RECIPE_PLAN, tp_overlap=1.5)


def test_h6_is_a_range_and_its_check_fails_a_blind_or_wrong_table():
    table = PR.h6_range(RECIPE)
    got = check.h6_is_a_range(table)
    assert got["mfu"][0] < 0.26 < 0.40 < got["mfu"][1]
    assert got["bubble"] == pytest.approx(3 / 11)
    blind_overlap = table.assign(
        tp_share=table.groupby("curve").tp_share.transform("max")
    )
    with pytest.raises(AssertionError, match="ignores the overlap"):
        check.h6_is_a_range(blind_overlap)
    blind_curve = table.assign(
        tp_share=table.groupby("tp_overlap").tp_share.transform("max")
    )
    with pytest.raises(AssertionError, match="ignores the curve"):
        check.h6_is_a_range(blind_curve)
    with pytest.raises(AssertionError, match="fastest plan"):
        check.h6_is_a_range(table.assign(best_mfu=table.mfu))
    with pytest.raises(ValueError, match="at least two of each"):
        check.h6_is_a_range(table[table.tp_overlap == 0.0])


def test_l2_holds_over_the_range_and_fails_where_tp_hides_everything():
    table = PR.l2_range()
    got = check.l2_over_the_range(table)
    assert 1.0 < got["dp_over_tp"][0] < got["dp_over_tp"][1]
    # the same model, with all of TP's traffic hidden: TP 8 catches up
    hidden = PR.l2_range(overlaps=(0.0, 1.0))
    with pytest.raises(AssertionError, match="TP 8 is as fast"):
        check.l2_over_the_range(hidden)
    blind = table.assign(tp_tokens_per_s=table.tp_tokens_per_s.min())
    with pytest.raises(AssertionError, match="ignores the overlap"):
        check.l2_over_the_range(blind)
    with pytest.raises(ValueError, match="tp_overlap=-0.1"):
        PR.l2_range(overlaps=(-0.1,))


def test_the_thin_chart_keeps_each_layouts_memory_speed_front():
    df = cl.models.planner.plan(LLAMA2_70B, 1024, global_batch=512)
    full = cl.planner.chart.planner_sweep(df, "70B")
    thin = cl.planner.chart.planner_sweep(df, "70B", thin=True)
    # both kinds stay: SP saves memory, and on NVSwitch costs time
    assert thin.plan.str.endswith("+SP").any()
    assert (~thin.plan.str.endswith("+SP") & thin.plan.str.startswith("TP8")).any()
    for _, p in thin.iterrows():
        rivals = full[full.plan.str.split(" ZeRO").str[0] == p.plan.split(" ZeRO")[0]]
        beats = (rivals.memory_GB <= p.memory_GB) & (rivals.mfu >= p.mfu)
        beats &= (rivals.memory_GB < p.memory_GB) | (rivals.mfu > p.mfu)
        assert not beats.any(), p.plan


def test_l1_follows_the_rule_unless_nearly_all_tp_hides():
    M = cl.models
    cases = [(M.compute.LLAMA2_13B, 64), (M.compute.LLAMA2_70B, 1024)]
    cells = PR.l1_range(cases).set_index(["curve", "tp_overlap"])
    assert cells.loc[(PC.DEFAULT_INTRA_NODE_SYSTEM, 0.0), "follows_rule"]
    assert cells.loc[(PC.PESSIMISTIC_INTRA_NODE_SYSTEM, 0.5), "follows_rule"]
    nearly = cells.loc[(PC.DEFAULT_INTRA_NODE_SYSTEM, 0.9)]
    assert not nearly.follows_rule and "Llama 2 13B (TP2" in nearly.breaks
    assert (cells["speedup_Llama 2 70B"] > 3).all()
