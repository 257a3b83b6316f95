"""torch.distributed.pipelining's interleaved and zero-bubble schedules on gloo ranks.

One launch runs every schedule; each must give the single process's gradients,
and hold the activations that playing its own action list predicts.
"""

import pytest
import torch

import clusterlab as cl
from clusterlab.pipeline.ranks import pipeline_reference_grads
from clusterlab.pipeline.schedules import (
    PIPELINING_SCHEDULES,
    compare_schedules,
    schedules_worker,
)

pytestmark = [pytest.mark.dist]

PAD = {"f_s": 0.002, "b_s": 0.002, "w_s": 0.002}


@pytest.fixture(scope="module")
def results():
    return cl.launch(schedules_worker, 2, timeout=60, **PAD)


def test_every_schedule_gives_the_single_process_gradients(results):
    reference = pipeline_reference_grads(4, width=8, batch=16)
    for k, name in enumerate(PIPELINING_SCHEDULES):
        held = set()
        for per_rank in results:
            assert per_rank[k]["schedule"] == name
            for block, grads in per_rank[k]["grads"].items():
                held.add(block)
                for got, want in zip(grads, reference[block], strict=True):
                    assert torch.allclose(got, want, atol=1e-6), (name, block)
        assert held == {0, 1, 2, 3}, name  # every block's gradient came back


def test_zero_bubble_schedules_split_the_backward(results):
    for k, name in enumerate(PIPELINING_SCHEDULES):
        kinds = {kind for per_rank in results for _, kind, _ in per_rank[k]["order"]}
        split = name in ("interleaved_zb", "zbv")
        assert kinds == ({"F", "I", "W"} if split else {"F", "B"}), name


def test_held_activations_are_what_the_action_lists_predict(results):
    table = compare_schedules(results, **PAD).set_index("schedule")
    assert (table.held_measured == table.held_predicted).all(), table
    assert table.at["1f1b", "held_predicted"] == 2  # p micro-batches on stage 0
    assert table.at["interleaved_1f1b", "held_predicted"] == 2.5  # p + (p - 1)/v
