"""torch.distributed.pipelining's interleaved and zero-bubble schedules on gloo ranks.

One launch runs every schedule, with the last block padded twice as long as
the others; each must give the single process's gradients, run the order its
published rule gives (``cl.models.pipeline_orders``), hold the activations
that rule predicts, and idle no less than it predicts.
"""

import pytest
import torch

import clusterlab as cl
from clusterlab.models.pipeline_orders import schedule_order
from clusterlab.pipeline.check_schedules import SCHEDULE_FLOOR
from clusterlab.pipeline.ranks import pipeline_reference_grads
from clusterlab.pipeline.schedules import (
    PIPELINING_SCHEDULES,
    compare_schedules,
    schedule_actions,
    schedules_worker,
)

pytestmark = [pytest.mark.dist]

PAD = {"f_s": [0.002] * 3 + [0.004], "b_s": 0.003, "w_s": [0.001] * 3 + [0.002]}


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


def test_torch_runs_the_order_each_schedules_rule_gives(results):
    for k, (name, (_, v, _, rule)) in enumerate(PIPELINING_SCHEDULES.items()):
        ours = schedule_order(rule, 2, 4, v)
        for rank, per_rank in enumerate(results):
            assert per_rank[k]["order"] == ours[rank], (name, rank)


def test_each_block_is_padded_with_its_own_times(results):
    acts = schedule_actions(results, "zbv", **PAD)
    fwd = acts[acts.kind == "F"].assign(took=lambda d: d.end - d.start)
    assert (fwd.took >= fwd.pad_s - 1e-4).all()
    assert set(fwd.pad_s.round(4)) == {0.002, 0.004}  # the heavier last block


def test_measured_bubbles_and_held_activations_against_the_rules(results):
    table = compare_schedules(results, **PAD).set_index("schedule")
    assert (table.held_measured == table.held_predicted).all(), table
    assert table.at["1f1b", "held_predicted"] == 2  # p micro-batches on rank 0
    assert table.at["interleaved_1f1b", "held_predicted"] == 2.5  # p + (p - 1)/v
    # Noise only adds idle time: no schedule idles less than its rule predicts.
    assert (table.measured >= table.predicted - SCHEDULE_FLOOR).all(), table
