"""FSDP2 on real process groups: bytes per rank against ZeRO-3, and training."""

import math

import pandas as pd
import pytest
import torch

import clusterlab as cl
from clusterlab.fsdp.ranks import fsdp_memory_worker

pytestmark = [pytest.mark.dist]


@pytest.fixture(scope="module")
def measured():
    return cl.fsdp.ranks.measure_fsdp_memory((1, 2, 4), width=64, depth=2)


def test_bytes_per_rank_are_within_ten_percent_of_zero3(measured):
    table = cl.fsdp.ranks.fsdp_vs_formula(measured)
    assert set(table["world_size"]) == {1, 2, 4}
    assert set(table["kind"]) == {"weights", "grads", "optimizer", "total"}
    bad = table[(table["ratio"] - 1).abs() > 0.10]
    assert bad.empty, f"measured bytes off ZeRO-3's formula by > 10%:\n{bad}"


def test_bytes_per_rank_fall_as_one_over_the_world_size(measured):
    total = measured.groupby(["world_size", "rank"])["bytes"].sum()
    one = total.loc[1].max()
    for n in (2, 4):
        assert total.loc[n].max() == pytest.approx(one / n, rel=0.01)


def test_the_shards_add_up_to_the_whole_model(measured):
    n_params = int(measured["n_params"].iloc[0])
    assert n_params == 3 * (64 * 64 + 64)
    weights = measured[measured["kind"] == "weights"]
    for n, part in weights.groupby("world_size"):
        assert part["bytes"].sum() == 4 * n_params, f"world size {n}"


def test_an_uneven_first_dimension_is_padded_and_the_formula_misses_it():
    # 10 rows over 4 ranks: shards of 3, 3, 3 and 1 rows, all stored as 3.
    out = cl.launch(fsdp_memory_worker, 4, width=10, depth=0)
    used = [r["weights_bytes"] for r in out]
    alloc = [r["weights_alloc_bytes"] for r in out]
    assert used == [4 * 33] * 3 + [4 * 11]
    assert alloc == [4 * 33] * 4
    n_params = out[0]["n_params"]
    assert max(used) / (4 * n_params / 4) == pytest.approx(1.2)


def test_fsdp_trains_like_one_process_on_the_whole_batch():
    kw = dict(width=16, depth=1, steps=3, return_params=True)
    two = cl.launch(fsdp_memory_worker, 2, batch_per_rank=4, **kw)
    one = cl.launch(fsdp_memory_worker, 1, batch_per_rank=8, **kw)
    assert torch.equal(two[0]["params"], two[1]["params"])
    gap = (two[0]["params"] - one[0]["params"]).abs().max().item()
    assert gap < 1e-6, f"2 FSDP ranks should train like 1 process: {gap:.2e}"
    assert not math.isnan(gap)


def test_bad_inputs_name_themselves():
    with pytest.raises(ValueError, match="steps=0"):
        fsdp_memory_worker(0, 1, steps=0)
    with pytest.raises(ValueError, match="world_sizes=0"):
        cl.fsdp.ranks.measure_fsdp_memory((0,))
    with pytest.raises(ValueError, match="measured must be a DataFrame"):
        cl.fsdp.ranks.fsdp_vs_formula(pd.DataFrame({"x": [1]}))
