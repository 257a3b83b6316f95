"""Claim H4 over the TP curve and its overlap: the table, and a check that fails."""

import pytest

import clusterlab as cl
from clusterlab.interconnects.check import h4_is_a_range
from clusterlab.models.recipe_comm import h4_sensitivity, recipe_step_comm

R = cl.models.recipes.ESSAY_70B
TABLE = h4_sensitivity(R)


def test_the_generation_matched_sweep_explains_the_published_mfu_without_overlap():
    row = TABLE.set_index(["curve", "tp_overlap"]).loc[("8xH200-NVLS-nccl2.27.7", 0.0)]
    assert row.near_published and not row.comm_bound
    assert row.tp_busbw_GBps == pytest.approx(401.9, abs=0.1)  # at 128 MiB
    assert row.bubble == pytest.approx(3 / 11)  # PP 4, 8 micro-batches, 1F1B
    verdict = h4_is_a_range(TABLE)
    assert ("8xH100-scalingbook", 0.0) in verdict["comm_bound"]


def test_a_model_blind_to_the_overlap_or_the_curve_fails():
    flat = TABLE.copy()
    flat["mfu"] = flat.groupby("curve")["mfu"].transform("first")
    with pytest.raises(AssertionError, match="ignores the overlap"):
        h4_is_a_range(flat)
    swapped = TABLE.copy()
    swapped["tp_busbw_GBps"] = swapped["tp_busbw_GBps"].iloc[::-1].to_numpy()
    with pytest.raises(AssertionError, match="ignores the curve"):
        h4_is_a_range(swapped)


def test_a_model_that_counts_the_bubble_twice_explains_nothing():
    twice = TABLE.assign(mfu=TABLE.mfu * (1 - TABLE.bubble), near_published=False)
    with pytest.raises(AssertionError, match="leaves out a cost or counts one twice"):
        h4_is_a_range(twice)
    with pytest.raises(ValueError, match="lacks the column"):
        h4_is_a_range(TABLE.drop(columns="mfu"))


def test_hidden_tp_cannot_exceed_the_gemms_beside_it():
    none = recipe_step_comm(R)
    half = recipe_step_comm(R, tp_overlap=0.5)
    assert half["tp_exposed_s"] == pytest.approx(none["tp_allreduce_s"] / 2)
    assert half["tp_allreduce_s"] == none["tp_allreduce_s"]
    with pytest.raises(ValueError, match="tp_overlap"):
        recipe_step_comm(R, tp_overlap=1.5)
