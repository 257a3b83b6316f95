"""Pipeline parallelism: schedules, gradients equal to one process, the bubble."""

import pytest
import torch

import clusterlab as cl
from clusterlab.models.pipeline import (
    bubble_fraction,
    peak_in_flight,
    simulate_schedule,
)
from clusterlab.pipeline.ranks import (
    pipeline_reference_grads,
    pipeline_waits,
    pipeline_worker,
    stage_schedule,
)

pytestmark = [pytest.mark.dist]


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("stages", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("microbatches", [1, 2, 3, 5, 8])
def test_each_stage_runs_the_order_the_model_simulates(schedule, stages, microbatches):
    sim = simulate_schedule(stages, microbatches, schedule)
    for s in range(stages):
        ops = stage_schedule(schedule, stages, microbatches, s)
        played = sim[sim.stage == s].sort_values("start")
        assert ops == list(zip(played.phase, played.microbatch, strict=True))
        # Every micro-batch goes forward once, then backward once.
        for i in range(microbatches):
            assert ops.index(("fwd", i)) < ops.index(("bwd", i))
        assert len(ops) == 2 * microbatches


def test_stage_schedule_refuses_bad_arguments():
    with pytest.raises(ValueError, match="schedule='zb'"):
        stage_schedule("zb", 4, 8, 0)
    with pytest.raises(ValueError, match="stage=4"):
        stage_schedule("1f1b", 4, 8, 4)
    with pytest.raises(ValueError, match="microbatches=3 must divide batch=32"):
        pipeline_worker(0, 1, microbatches=3)  # checked before any message


@pytest.mark.parametrize(
    ("schedule", "world_size"), [("gpipe", 4), ("1f1b", 4), ("1f1b", 2)]
)
def test_gradients_equal_one_process(schedule, world_size):
    res = cl.launch(
        pipeline_worker,
        world_size,
        timeout=30,
        schedule=schedule,
        microbatches=4,
        fwd_s=0.0,
        bwd_s=0.0,
        seed=5,
    )
    ref = pipeline_reference_grads(world_size, 16, 32, seed=5)
    for stage, r in enumerate(res):
        for got, want in zip(r["grads"], ref[stage], strict=True):
            torch.testing.assert_close(got, want)
    # The pipeline really was split: each rank holds one stage's gradients only.
    assert len(res[0]["grads"]) == 2


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_peak_activations_held_follow_the_schedule(schedule):
    res = cl.launch(
        pipeline_worker, 4, schedule=schedule, microbatches=8, fwd_s=0.0, bwd_s=0.0
    )
    measured = [r["peak_in_flight"] for r in res]
    simulated = peak_in_flight(simulate_schedule(4, 8, schedule)).tolist()
    assert measured == simulated == ([8] * 4 if schedule == "gpipe" else [4, 3, 2, 1])


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_measured_bubble_fits_the_formula_and_the_check_rejects_wrong_models(schedule):
    # The bound is the noise of the same run (message delays, late wake-ups),
    # and the check measures again (at most 3 times) when a hiccup exceeds it.
    table = cl.pipeline.measure.check_bubble(
        lambda p, m: bubble_fraction(p, m, schedule),
        4,
        microbatches=(1, 4, 8),
        schedule=schedule,
    )
    assert (table["verdict"] == "fits").all(), table
    wrong = cl.pipeline.measure.bubble_verdict(table, lambda p, m: (p - 1) / m, 4)
    assert (wrong["verdict"] == "below").all()
    if table["decided"].all():  # on a machine too busy to decide, no claim
        none = cl.pipeline.measure.bubble_verdict(table, lambda p, m: 0.0, 4)
        assert (none["verdict"] == "above").all()
    # Each stage idles about (p - 1)(f + b) whatever m is; the waits are stamped.
    assert (table["idle_s"] > 3 * (0.03 + 0.06) * 0.95).all()
    assert (table["recv_wait_share"] > 0).all()


def test_bubble_check_fails_when_the_model_has_no_bubble():
    with pytest.raises(AssertionError, match="model"):
        cl.pipeline.measure.check_bubble(lambda p, m: 0.0, 4, microbatches=(1, 8))


def test_without_messages_the_same_sleeps_leave_no_bubble():
    table = cl.pipeline.measure.check_bubble(
        lambda p, m: 0.0, 4, microbatches=(8,), dependencies=False
    )
    assert (table["verdict"] == "fits").all()
    assert table["recv_wait_share"].iloc[0] == 0.0
    assert table["measured"].iloc[0] < bubble_fraction(4, 8) / 2


def test_one_launch_runs_several_micro_batch_counts_with_their_own_waits():
    res = cl.launch(
        pipeline_worker, 2, microbatches=(1, 4), fwd_s=0.0, bwd_s=0.0, seed=5
    )
    assert [len(r) for r in res] == [2, 2]
    first, last = (pipeline_waits([rank[k] for rank in res]) for k in (0, 1))
    # Stage 0 waits for one gradient per micro-batch, stage 1 for one input.
    assert first.groupby("stage").size().tolist() == [1, 1]
    assert last.groupby("stage").size().tolist() == [4, 4]
    assert (last["end"] >= last["start"]).all() and (last["start"] >= 0).all()
    ref = pipeline_reference_grads(2, 16, 32, seed=5)
    for stage in range(2):  # gradients do not leak from one step into the next
        for got, want in zip(res[stage][1]["grads"], ref[stage], strict=True):
            torch.testing.assert_close(got, want)
