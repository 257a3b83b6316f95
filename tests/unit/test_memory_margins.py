"""Memory margins as a sensitivity: state bytes, DualPipe's copy, the fill share."""

import pytest

import clusterlab as cl
from clusterlab.models import memory_margins as MM
from clusterlab.models import planner5d as P5
from clusterlab.models.compute import LLAMA2_70B

LAYOUT = P5.published_layout("DeepSeek-V3 pre-training")
DS = P5.moe_shape()
PLAN = P5.layout_plan(LAYOUT)


def test_state_bytes_and_copies_change_exactly_the_state_they_name():
    base = P5.plan5d_row(DS, **PLAN)
    same = P5.plan5d_row(DS, **PLAN, state_bytes=(2.0, 2.0, 12.0), weight_copies=1)
    assert same["memory_bytes"] == pytest.approx(base["memory_bytes"])
    # fp32 gradients: +2 bytes per parameter a GPU holds, unsharded under ZeRO-1
    other, experts = P5.split_params(DS)
    held = other / (PLAN["tp"] * PLAN["pp"]) + experts / (PLAN["pp"] * PLAN["ep"])
    g4 = P5.plan5d_row(DS, **PLAN, state_bytes=(2.0, 4.0, 12.0))
    assert g4["memory_bytes"] - base["memory_bytes"] == pytest.approx(
        2 * held, rel=1e-9
    )
    # DualPipe's second copy: the bf16 weights once more
    two = P5.plan5d_row(DS, **PLAN, weight_copies=2)
    assert two["second_copy_bytes"] == pytest.approx(2 * held, rel=1e-9)
    assert base["second_copy_bytes"] == 0.0
    assert two["step_s"] == base["step_s"]  # memory only
    with pytest.raises(ValueError, match="weight_copies=3"):
        P5.plan5d_row(DS, **PLAN, weight_copies=3)
    with pytest.raises(ValueError, match=r"state_bytes=\(2, 2\)"):
        P5.plan5d_row(DS, **PLAN, state_bytes=(2, 2))


def test_deepseek_v3_fits_only_on_the_planners_own_accounting():
    t = MM.margin_table(DS, PLAN).set_index(["state", "weight_copies"])
    planner, report = list(MM.STATE_BYTES)[0], list(MM.STATE_BYTES)[2]
    assert t.loc[(planner, 1), "margin_0.90_GB"] > 0  # the planner's "fits"
    assert abs(t.loc[(report, 1), "margin_0.90_GB"]) < 0.5  # at the limit
    assert (
        t.loc[(report, 2), "margin_0.90_GB"] < 0 < t.loc[(report, 2), "margin_0.95_GB"]
    )
    assert (t["margin_0.85_GB"] < 0).all()
    assert (t["hbm_GB"] == 80.0).all()


def test_the_70b_recipe_without_recomputation_needs_the_planners_state_bytes():
    plan = MM.recipe_plan(cl.models.recipes.ESSAY_70B, recompute="none")
    t = MM.margin_table(LLAMA2_70B, plan, copies=(1,)).set_index("state")
    assert t["margin_0.90_GB"].iloc[0] > 0
    assert t.loc["Megatron-Core, fp32 main gradients", "margin_0.90_GB"] < 0
    with pytest.raises(ValueError, match="fill_shares"):
        MM.margin_table(LLAMA2_70B, plan, fill_shares=(1.2,))
    with pytest.raises(ValueError, match="states="):
        MM.margin_table(LLAMA2_70B, plan, states=("fp64 everything",))


def test_the_h800_link_is_the_reports_160_gbps_and_ib_still_bounds_the_layout():
    h800 = cl.models.links.LINKS["H800 NVLink"]
    assert h800.effective_Bps == pytest.approx(160e9)
    assert PLAN["scale_up_link"] == "H800 NVLink"
    fast = P5.plan5d_row(DS, **(PLAN | {"scale_up_link": "NVLink 4"}))
    slow = P5.plan5d_row(DS, **PLAN)
    assert slow["ep_comm_s"] == pytest.approx(fast["ep_comm_s"])  # the network binds
    rack = dict(PLAN, nvlink_domain=72)
    assert (
        P5.plan5d_row(DS, **rack)["ep_comm_s"]
        > P5.plan5d_row(DS, **(rack | {"scale_up_link": "NVLink 4"}))["ep_comm_s"]
    )
    with pytest.raises(ValueError, match="scale_up_link='NVLink 9'"):
        P5.plan5d_row(DS, **(PLAN | {"scale_up_link": "NVLink 9"}))
