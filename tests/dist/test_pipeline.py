"""Pipeline parallelism: schedules, gradients equal to one process, the bubble."""

import pytest
import torch

import clusterlab as cl
from clusterlab.dist.pipeline import (
    pipeline_reference_grads,
    pipeline_timeline,
    pipeline_worker,
    stage_schedule,
)
from clusterlab.models.pipeline import (
    bubble_fraction,
    peak_in_flight,
    simulate_schedule,
    simulated_bubble,
)

pytestmark = [pytest.mark.dist, pytest.mark.usefixtures("no_leftover_processes")]


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
    res = cl.dist.launch(
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
    res = cl.dist.launch(
        pipeline_worker, 4, schedule=schedule, microbatches=8, fwd_s=0.0, bwd_s=0.0
    )
    measured = [r["peak_in_flight"] for r in res]
    simulated = peak_in_flight(simulate_schedule(4, 8, schedule)).tolist()
    assert measured == simulated == ([8] * 4 if schedule == "gpipe" else [4, 3, 2, 1])


@pytest.mark.parametrize(("schedule", "microbatches"), [("gpipe", 4), ("1f1b", 8)])
def test_measured_bubble_matches_the_formula(schedule, microbatches):
    # Noise (messages, late wake-ups) only adds idle time, so the best of two
    # runs is compared; the bounds still reject (p - 1) / m at these sizes and
    # a pipeline that does not overlap stages at all.
    idle = min(
        simulated_bubble(
            pipeline_timeline(
                cl.dist.launch(
                    pipeline_worker,
                    4,
                    schedule=schedule,
                    microbatches=microbatches,
                    fwd_s=0.03,
                    bwd_s=0.06,
                )
            )
        )
        for _ in range(2)
    )
    model = bubble_fraction(4, microbatches, schedule)
    assert model - 0.03 <= idle <= model + 0.09, (idle, model)
