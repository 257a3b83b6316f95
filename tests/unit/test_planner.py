import math
import time

import pytest

from clusterlab.models.compute import LLAMA2_7B, LLAMA2_70B, ModelShape
from clusterlab.models.memory import training_memory
from clusterlab.models.planner import plan, plan_row

H6 = dict(tp=8, pp=4, dp=32, global_batch=512, micro_batch=2)


def test_every_plan_uses_all_gpus_and_feasible_ones_come_first():
    df = plan(LLAMA2_70B, 64, global_batch=64, micro_batch=1)
    assert (df.tp * df.pp * df.dp == 64).all()
    assert df.feasible.iloc[0] and not df.feasible.iloc[-1]
    first_bad = df.feasible.to_numpy().argmin()
    assert not df.feasible.iloc[first_bad:].any()
    ok = df[df.feasible]
    assert ok.tokens_per_s.is_monotonic_decreasing


def test_row_memory_is_the_memory_model():
    row = plan_row(
        LLAMA2_70B, zero_stage=1, recompute="selective", sequence_parallel=True, **H6
    )
    mem = training_memory(
        70e9, tp=8, pp=4, dp=32, zero_stage=1, n_layers=80, hidden=8192,
        seq_len=4096, micro_batch=2, n_heads=64, sequence_parallel=True,
        recompute="selective", microbatches=8,
    )  # fmt: skip
    assert row["memory_bytes"] == pytest.approx(mem["total"])
    assert row["microbatches"] == 8
    assert row["bubble"] == pytest.approx(3 / 11)
    assert row["fits"]


def test_h6_recipe_needs_recomputation():
    bare = plan_row(
        LLAMA2_70B, zero_stage=1, recompute="none", sequence_parallel=False, **H6
    )
    assert not bare["fits"] and bare["memory_bytes"] > 100e9


def test_a_batch_that_cannot_be_split_gives_no_speed():
    row = plan_row(
        LLAMA2_7B, tp=1, pp=1, dp=8, zero_stage=1, recompute="full",
        sequence_parallel=False, global_batch=4,
    )  # fmt: skip
    assert not row["batch_ok"] and math.isnan(row["tokens_per_s"])


def test_mfu_is_below_matmul_efficiency_and_pipeline_bubble_costs_time():
    df = plan(LLAMA2_70B, 1024, global_batch=512, micro_batch=2)
    assert (df.mfu.dropna() <= 0.8 + 1e-9).all()
    same = df[(df.tp == 8) & (df.zero_stage == 1) & (df.recompute == "full")]
    same = same[same.sequence_parallel].set_index("pp")
    # More stages, fewer micro-batches per replica: the bubble grows.
    assert same.loc[8, "bubble"] > same.loc[4, "bubble"] > same.loc[2, "bubble"]


def test_tp_beyond_a_node_is_slower():
    kw = dict(pp=1, zero_stage=1, recompute="full", sequence_parallel=True)
    inside = plan_row(LLAMA2_70B, tp=8, dp=16, global_batch=128, **kw)
    across = plan_row(LLAMA2_70B, tp=16, dp=8, global_batch=128, **kw)
    assert across["tp_comm_s"] > 5 * inside["tp_comm_s"]


def test_plan_is_fast_enough_for_a_widget():
    best = min(
        _timed(lambda: plan(LLAMA2_70B, 1024, global_batch=512)) for _ in range(3)
    )
    assert best < 0.5


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="n_gpus"):
        plan(LLAMA2_70B, 0, global_batch=8)
    with pytest.raises(ValueError, match="n_gpus"):
        plan(ModelShape("odd", 1e9, 8, 1024, 7, 7, 4096, 1000, 512), 6,
             global_batch=8, tp_options=(4,))  # fmt: skip


def test_exercise_check_accepts_the_solution_and_rejects_wrong_answers(capsys):
    import clusterlab as cl

    assert cl.check.zero_bytes_per_param(cl.solutions.zero_bytes_per_param)
    assert "\u2714" in capsys.readouterr().out

    def stub(stage, dp):
        raise NotImplementedError

    assert cl.check.zero_bytes_per_param(stub) is False
    assert "not attempted" in capsys.readouterr().out

    def off_by_one_stage(stage, dp):  # shards the weights already at stage 2
        return cl.solutions.zero_bytes_per_param(min(3, stage + (stage == 2)), dp)

    with pytest.raises(AssertionError, match="stage 3's answer"):
        cl.check.zero_bytes_per_param(off_by_one_stage)
    with pytest.raises(AssertionError, match="16 whatever"):
        cl.check.zero_bytes_per_param(lambda stage, dp: 16)


def test_widget_builds_and_updates_quickly():
    import clusterlab as cl

    box = cl.ui.planner_widget()
    box.update()
    best = min(_timed(box.update) for _ in range(3))
    assert best < 0.6  # 200 ms target on a quiet machine; bound survives noise


def test_static_twin_has_a_radio_and_a_slider():
    import pandas as pd

    import clusterlab as cl

    parts = [
        cl.viz.planner_sweep(plan(m, g, global_batch=b), f"{m.name} on {g} GPUs")
        for m, g, b in ((LLAMA2_7B, 8, 64), (LLAMA2_70B, 64, 64))
    ]
    spec = cl.viz.planner_explorer(pd.concat(parts)).to_dict()
    binds = [p.get("bind", {}).get("input") for p in spec["params"]]
    assert sorted(binds) == ["radio", "range"]
    assert spec["title"]["text"] and "subtitle" in spec["title"]
