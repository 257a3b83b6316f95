"""The collectives and data-parallel labs' timing checks fail on a wrong model.

Each check compares a model with a measurement and measures again (bounded)
when a try misses. Here the measurements are fixed, as a quiet machine gives
them, so only the model decides: a right one passes, a wrong one (alpha left
out, beta 4x off) fails on every try. Real runs are in
``tests/distributed/test_lab04_bench.py`` and
``tests/distributed/test_data_parallel.py``.
"""

import numpy as np
import pandas as pd
import pytest

import clusterlab as cl
from clusterlab.collectives import check as cc
from clusterlab.data_parallel import check as cdp

ALPHA_S, BETA_BPS = 3.5e-4, 0.9e9  # a gloo all-reduce on 2 CPU ranks


def all_reduce_sweep(noise=0.1, seed=0):
    """An all-reduce sweep that follows alpha-beta with a quiet machine's noise."""
    rng = np.random.default_rng(seed)
    sizes = np.array([2**k for k in range(8, 23)])
    times = (2 * ALPHA_S + sizes / BETA_BPS) * (1 + noise * rng.random(len(sizes)))
    return pd.DataFrame({"size_bytes": sizes, "time_s": times})


def test_holdout_passes_a_right_fit_on_a_quiet_sweep():
    held = cc.holdout_fit(all_reduce_sweep(), tries=1)
    assert held.attrs["median_error"] < cc.HOLDOUT_MEDIAN_BELOW


def test_holdout_fails_when_alpha_is_zero():
    def no_alpha(sizes, times):
        _, beta = cl.core.alpha_beta.fit_alpha_beta(sizes, times)
        return 0.0, beta

    with pytest.raises(AssertionError, match="median"):
        cc.holdout_fit(all_reduce_sweep(), tries=1, fit=no_alpha)


def test_holdout_fails_when_beta_is_off_by_4x():
    def fast_beta(sizes, times):
        alpha, beta = cl.core.alpha_beta.fit_alpha_beta(sizes, times)
        return alpha, 4 * beta

    with pytest.raises(AssertionError, match="largest size"):
        cc.holdout_fit(all_reduce_sweep(), tries=1, fit=fast_beta)


#: Parts of a 4 MiB all-reduce on 2 gloo ranks, as a quiet run of ring_parts gave them.
PARTS = {
    "allreduce_s": 3.0e-3,
    "step_s": 1.35e-3,
    "add_s": 6.2e-5,
    "one_way_s": 6.5e-4,
    "size_bytes": 2**22,
    "world_size": 2,
}


def test_ring_from_parts_passes_the_parts_of_a_quiet_run():
    got = cc.ring_from_parts(PARTS, tries=1)
    assert got["predicted_s"] == pytest.approx(2 * 1.35e-3 + 6.2e-5)
    assert got["ratio"] == pytest.approx(3.0e-3 / (2 * 1.35e-3 + 6.2e-5))


def test_ring_of_parts_counts_2_n_minus_1_steps_and_n_minus_1_additions():
    eight = dict(PARTS, world_size=8)
    assert cc.ring_of_parts(eight) == pytest.approx(14 * 1.35e-3 + 7 * 6.2e-5)


@pytest.mark.parametrize("factor", [4.0, 0.25])
def test_ring_from_parts_fails_when_a_step_is_priced_4x_off(factor):
    def wrong(parts):
        n = parts["world_size"]
        return 2 * (n - 1) * parts["step_s"] / factor + (n - 1) * parts["add_s"]

    with pytest.raises(AssertionError, match="ring of measured parts"):
        cc.ring_from_parts(PARTS, tries=1, predict=wrong)


def test_ring_from_parts_fails_a_duplex_model_where_a_step_costs_twice_a_message():
    # Priced as one-way messages, the ring is too cheap once a step costs 2.1x.
    slow_step = dict(PARTS, step_s=2.1 * PARTS["one_way_s"], allreduce_s=2.9e-3)

    def duplex(parts):
        return 2 * parts["one_way_s"] + parts["add_s"]

    assert cc.ring_from_parts(slow_step, tries=1)["ratio"] < 1.1
    with pytest.raises(AssertionError, match="ratio 2.1"):
        cc.ring_from_parts(slow_step, tries=1, predict=duplex)


def test_ring_from_parts_names_what_is_missing_or_wrong():
    with pytest.raises(ValueError, match="lacks \\['step_s'\\]"):
        cc.ring_from_parts({k: v for k, v in PARTS.items() if k != "step_s"})
    with pytest.raises(ValueError, match="parts\\['add_s'\\]=0"):
        cc.ring_from_parts(dict(PARTS, add_s=0))
    with pytest.raises(ValueError, match="rounds=0"):
        cc.ring_from_parts(PARTS, rounds=0)


def test_plain_loop_agreement_fails_when_the_benchmark_forgot_to_divide():
    agree = {"plain_s": 1e-3, "bench_s": 5e-3, "bench_over_plain": 5.0}
    with pytest.raises(AssertionError, match="plain loop"):
        cc.plain_loop_agreement(agree, tries=1)
    ok = {"plain_s": 1e-3, "bench_s": 1.1e-3, "bench_over_plain": 1.1}
    assert cc.plain_loop_agreement(ok, tries=1)["tries"] == 1


TENSORS = [256 * 256 * 4, 256 * 4] * 3  # the lab's SMOKE MLP


def fake_run(comm_s, steps=6):
    """Per-rank results of dp_train_worker on 2 ranks with fixed step times."""
    rank = {"hand": {"comm_s": [10 * comm_s] * 2 + [comm_s] * (steps - 2)}}
    return [rank, rank]


def right_comm_s(ratio=1.3):
    model = cl.models.collectives.allreduce_time
    return ratio * sum(model(s, 2, ALPHA_S, BETA_BPS) for s in TENSORS)


def test_best_step_leaves_out_the_warm_up_and_takes_the_slowest_rank():
    fast = {"hand": {"comm_s": [9.0, 9.0, 3.0, 2.0]}}
    slow = {"hand": {"comm_s": [9.0, 9.0, 1.0, 4.0]}}
    assert cdp.best_step_s([fast, slow]) == 3.0
    with pytest.raises(ValueError, match="steps"):
        cdp.best_step_s([{"hand": {"comm_s": [1.0, 2.0]}}])


def test_comm_prediction_passes_a_right_model():
    got = cdp.comm_prediction(fake_run(right_comm_s()), TENSORS, ALPHA_S, BETA_BPS,
                              tries=1)  # fmt: skip
    assert got["ratio"] == pytest.approx(1.3)


def test_comm_prediction_fails_when_alpha_is_zero():
    def no_alpha(nbytes, n, alpha_s, bw_Bps):
        return cl.models.collectives.allreduce_time(nbytes, n, 0.0, bw_Bps)

    with pytest.raises(AssertionError, match="alpha"):
        cdp.comm_prediction(
            fake_run(right_comm_s()), TENSORS, ALPHA_S, BETA_BPS, tries=1,
            predict=no_alpha,
        )  # fmt: skip


def parts(comm_4=0.06, ddp_4=0.03):
    return pd.DataFrame(
        {
            "compute": [0.002, 0.003, 0.006],
            "all-reduce": [0.0001, 0.01, comm_4],
            "whole step (overlapped)": [0.002, 0.01, ddp_4],
        },
        index=[1, 2, 4],
    )


def test_step_parts_passes_what_the_lab_measures():
    assert cdp.step_parts(parts()) is True


def test_step_parts_fails_when_communication_does_not_grow():
    with pytest.raises(AssertionError, match="grow"):
        cdp.step_parts(parts(comm_4=0.00005))


def test_step_parts_fails_when_ddp_has_no_overlap_and_no_buckets():
    with pytest.raises(AssertionError, match="buckets"):
        cdp.step_parts(parts(ddp_4=0.07))
