"""The slow-hop model and the check that decides S5: hand cases and wrong inputs."""

import math

import numpy as np
import pandas as pd
import pytest

from clusterlab.core.busy import retry
from clusterlab.models.ring_hops import hop_step_s, ring_time_hops
from clusterlab.ring import measure as rh

N, NBYTES, DELAY_S, BPS = 4, 2**16, 10e-3, 4e6
FAST_S = 0.012  # a fast ring of 4 ranks: 2 ms a step


def _model(fast_s, hop="slowest"):
    a = fast_s / (2 * (N - 1))
    alpha = a + DELAY_S
    one = ring_time_hops(NBYTES, [alpha, a, a, a], [BPS] + [math.inf] * 3, hop=hop)
    every = ring_time_hops(NBYTES, [alpha] * N, BPS, hop=hop)
    return {"one slow hop": one, "every hop slow": every}


def _measured(one_s=None, every_s=None, jitter_s=1e-3, overshoot_s=1e-4):
    """Seven repeats per case, as a ring that runs at its slowest hop would give."""
    slow = 2 * (N - 1) * (FAST_S / 6 + DELAY_S + NBYTES / N / BPS)
    best = {
        "uniform fast": FAST_S,
        "one slow hop": slow if one_s is None else one_s,
        "every hop slow": slow if every_s is None else every_s,
    }
    rng = np.random.default_rng(0)
    rows = [
        (case, rep, t + (0 if rep == 0 else rng.uniform(0, jitter_s)))
        for rep in range(7)
        for case, t in best.items()
    ]
    df = pd.DataFrame(rows, columns=["case", "repeat", "time_s"])
    df.attrs.update(world_size=N, overshoot_s=overshoot_s)
    return df


def test_ring_time_is_set_by_the_slowest_hop_by_hand():
    # 4 hops of 1 ms, one of 1 ms + 1 MB/4 at 1 MB/s = 251 ms: 6 steps of 251 ms.
    t = ring_time_hops(1e6, [1e-3] * 4, [math.inf, math.inf, math.inf, 1e6])
    assert t == pytest.approx(6 * (1e-3 + 0.25))
    mean = ring_time_hops(1e6, [1e-3] * 4, [math.inf] * 3 + [1e6], hop="mean")
    assert mean == pytest.approx(6 * (1e-3 + 0.25 / 4))
    # equal hops: the textbook ring 2(n-1) alpha + 2(n-1)/n S / beta
    uniform = ring_time_hops(8e6, [5e-6] * 8, 50e9)
    assert uniform == pytest.approx(14 * 5e-6 + 14 / 8 * 8e6 / 50e9)
    assert list(hop_step_s(4.0, 2, 0.0, [1.0, 2.0])) == [2.0, 1.0]


def test_ring_time_rejects_bad_hops():
    with pytest.raises(ValueError, match="hop_alpha_s"):
        ring_time_hops(1e6, [1e-3], 1e9)
    with pytest.raises(ValueError, match="hop_Bps"):
        ring_time_hops(1e6, [1e-3] * 4, [1e9, 0.0, 1e9, 1e9])
    with pytest.raises(ValueError, match="hop='median'"):
        ring_time_hops(1e6, [1e-3] * 4, 1e9, hop="median")
    with pytest.raises(ValueError, match="one per hop"):
        hop_step_s(1e6, 4, [1e-3] * 3, 1e9)


def test_the_slowest_hop_model_passes_a_ring_that_runs_at_its_slowest_hop():
    df = _measured()
    verdict = rh.slow_hop_verdict(df, _model(FAST_S))
    assert verdict["status"] == "pass", verdict["text"]


def test_slow_hop_check_fails_when_the_model_averages_the_hops():
    df = _measured()
    verdict = rh.slow_hop_verdict(df, _model(FAST_S, hop="mean"))
    assert verdict["status"] == "miss", verdict["text"]
    assert "one slow hop" in verdict["text"]


def test_slow_hop_check_fails_when_the_slow_hop_was_not_slowed():
    # a skipped step: the "one slow hop" ring ran with no delay at all
    df = _measured(one_s=FAST_S * 1.05)
    assert rh.slow_hop_verdict(df, _model(FAST_S))["status"] == "miss"


def test_slow_hop_check_fails_when_the_delay_is_mispriced():
    # a model that forgets the bandwidth cap, alpha only
    model = _model(FAST_S)
    wrong = {k: v - 2 * (N - 1) * NBYTES / N / BPS for k, v in model.items()}
    assert rh.slow_hop_verdict(_measured(), wrong)["status"] == "miss"


def test_slow_hop_check_calls_a_noisy_run_noisy_not_wrong():
    df = _measured(jitter_s=0.2)
    verdict = rh.slow_hop_verdict(df, _model(FAST_S, hop="mean"))
    assert verdict["status"] == "busy" and "busy" in verdict["text"]


def _retry(measure, model, said):
    return retry(
        measure,
        lambda df: rh.slow_hop_verdict(df, model),
        what="the slowest-hop model",
        hint="the model averages the hops",
        say=said.append,
    )


def test_retry_says_busy_in_plain_words_and_measures_again():
    runs = iter([_measured(jitter_s=0.2), _measured()])
    said = []
    done = _retry(lambda: next(runs), _model(FAST_S), said)
    assert done.verdict == "pass" and done.tries == 2
    assert done.judged["status"] == "pass"
    assert "this machine was busy" in said[0] and "measuring again" in said[0]
    assert said[-1].startswith("try 2 of 3") and said[-1].endswith("passed")


def test_retry_fails_when_the_model_stays_wrong():
    calls = []

    def measure():
        calls.append(1)
        return _measured()

    with pytest.raises(AssertionError, match="missed on all 3 tries"):
        _retry(measure, _model(FAST_S, hop="mean"), [])
    assert len(calls) == 3


def test_retry_on_a_machine_that_stays_busy_says_undecided_without_raising():
    said = []
    done = _retry(lambda: _measured(jitter_s=0.2), _model(FAST_S), said)
    assert done.verdict == "busy" and not done.decided
    assert "undecided after 3 tries" in said[-1]


def test_summaries_keep_the_best_run():
    s = rh.summarize_timings(_measured())
    assert s.at["uniform fast", "best_s"] == FAST_S
    assert (s["spread_s"] >= 0).all()


def _steps(old_ar=0.2, new_ar=0.05, compute=0.03, new_step=None, jitter_s=1e-3):
    best = {
        "compute": compute,
        "old all-reduce": old_ar,
        "old step": compute + old_ar,
        "new all-reduce": new_ar,
        "new step": compute + new_ar if new_step is None else new_step,
    }
    rows = [
        (case, rep, t + rep * jitter_s) for rep in range(5) for case, t in best.items()
    ]
    return pd.DataFrame(rows, columns=["case", "repeat", "time_s"]), best


def _step_model(best):
    return (best["compute"] + best["old all-reduce"]) / (
        best["compute"] + best["new all-reduce"]
    )


def test_a_step_speedup_of_compute_plus_exposed_comm_passes():
    df, best = _steps()
    verdict = rh.speedup_verdict(df, "old", "new", _step_model(best))
    assert verdict["status"] == "pass", verdict["text"]


def test_step_speedup_check_fails_when_the_model_forgets_the_compute():
    df, best = _steps()
    wrong = best["old all-reduce"] / best["new all-reduce"]
    assert rh.speedup_verdict(df, "old", "new", wrong)["status"] == "miss"


def test_step_speedup_check_fails_when_the_new_step_did_not_speed_up():
    df, best = _steps(new_step=0.23 * 0.9)
    assert rh.speedup_verdict(df, "old", "new", _step_model(best))["status"] == "miss"


def test_a_part_slower_than_its_step_is_called_noisy():
    df, best = _steps(new_ar=0.12, new_step=0.08)
    verdict = rh.speedup_verdict(df, "old", "new", 1.5)
    assert verdict["status"] == "busy" and "busy" in verdict["text"]
