"""The checks that decide S4 and S6 on real ranks: right models pass, wrong ones fail.

The measurements here are synthetic tables shaped like those of
``measure_mixed_step`` and ``measure_step_speedup``, built from what real ranks
do (a sleep, then an all-reduce), with a little jitter on every repeat but the
best, so the verdicts are decided without starting any process.
"""

import numpy as np
import pandas as pd
import pytest

from clusterlab.interconnects import measure as pc
from clusterlab.models import contention as mc

SPEEDS, WORK_S, COMM_S = [0.5, 1.0, 1.0, 1.0], 0.04, 0.002


def _table(best: dict, jitter_s=1e-3, repeats=5) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = [
        (case, rep, t + (0 if rep == 0 else rng.uniform(0, jitter_s)))
        for rep in range(repeats)
        for case, t in best.items()
    ]
    return pd.DataFrame(rows, columns=["case", "repeat", "time_s"])


def _mixed(equal_s=None, jitter_s=1e-3):
    """What four ranks measure when the step waits for the slowest."""
    n = len(SPEEDS)
    best = {
        "all-reduce alone": COMM_S,
        "equal split": COMM_S + WORK_S / min(SPEEDS) if equal_s is None else equal_s,
        "split by speed": COMM_S + n * WORK_S / sum(SPEEDS),
    }
    df = _table(best, jitter_s)
    df.attrs.update(speeds=SPEEDS, work_s=WORK_S, overshoot_s=1e-4)
    return df


def _averaging_model(counts, speeds):
    """A wrong model: mixed parts average out, nobody waits for the slowest."""
    total = sum(c * s for c, s in zip(counts, speeds, strict=True))
    return {"synchronous": total, "balanced": total}


def test_mixed_step_prediction_by_hand():
    pred = pc.predict_mixed_steps(_mixed())
    # four units at the slowest rank's pace (0.5): 4 / 2 * 40 ms = 80 ms
    assert pred["equal split"] == pytest.approx(COMM_S + 0.080)
    assert pred["split by speed"] == pytest.approx(COMM_S + 4 / 3.5 * WORK_S)


def test_mixed_step_check_passes_the_slowest_sets_the_pace():
    df = _mixed()
    v = pc.mixed_step_verdict(df, pc.predict_mixed_steps(df))
    assert v["status"] == "pass", v["text"]


def test_mixed_step_check_fails_when_mixed_parts_average_out():
    df = _mixed()
    v = pc.mixed_step_verdict(df, pc.predict_mixed_steps(df, model=_averaging_model))
    assert v["status"] == "miss" and "equal split" in v["text"]


def test_mixed_step_check_fails_when_ranks_did_not_wait():
    # a perturbed measurement: the step ended with the fast ranks (42 ms)
    df = _mixed(equal_s=COMM_S + WORK_S)
    v = pc.mixed_step_verdict(df, pc.predict_mixed_steps(df))
    assert v["status"] == "miss"


def test_mixed_step_check_is_noisy_on_a_busy_machine():
    df = _mixed(jitter_s=0.05)
    v = pc.mixed_step_verdict(df, pc.predict_mixed_steps(df))
    assert v["status"] == "busy" and "busy" in v["text"]


def test_mixed_step_verdict_rejects_a_partial_prediction():
    with pytest.raises(ValueError, match="lacks"):
        pc.mixed_step_verdict(_mixed(), {"equal split": 0.08})


STOLEN, FIXED_S = 0.5, 0.015  # the ring's fixed costs do not stretch


def _shared(network_share, stolen=STOLEN, bw_s=0.06, jitter_s=1e-3, stretch=None):
    """Compute, then a ring whose bandwidth is whole, has ``stolen`` taken, or no cap.

    ``network_share`` is the share of the whole step that waits on bandwidth.
    """
    alone = FIXED_S + bw_s
    compute = bw_s / network_share - alone
    slow = FIXED_S + bw_s * (1 / (1 - stolen) if stretch is None else stretch)
    best = {"compute": compute}
    for name, ar in (("alone", alone), ("shared", slow), ("free", FIXED_S)):
        best |= {f"{name} all-reduce": ar, f"{name} step": compute + ar}
    return _table(best, jitter_s)


def test_contention_check_passes_the_model_at_the_designed_share():
    f = mc.network_share_for_drop(0.40, STOLEN)
    v = pc.contention_verdict(_shared(f), STOLEN)
    assert v["status"] == "pass", v["text"]
    assert v["network_share"] == pytest.approx(2 / 3, abs=1e-3)
    assert v["drop_measured"] == pytest.approx(0.40, abs=1e-3)
    assert v["share_from_drop"] == pytest.approx(2 / 3, abs=1e-3)


def test_contention_check_fails_when_the_drop_is_the_stolen_share():
    def wrong(f, c):  # "throughput falls by the share other traffic takes"
        return c

    v = pc.contention_verdict(_shared(2 / 3), STOLEN, drop_model=wrong)
    assert v["status"] == "miss"


def test_contention_check_fails_when_the_drop_is_linear_in_the_share():
    def wrong(f, c):  # the network part loses c of its speed: f * c, too little
        return f * c

    v = pc.contention_verdict(_shared(2 / 3), STOLEN, drop_model=wrong)
    assert v["status"] == "miss"


def test_contention_check_fails_when_share_for_drop_is_wrong():
    def wrong(drop, c):  # forgets the (1 - c): asks for half the true share
        return (1 / (1 - drop) - 1) / c

    v = pc.contention_verdict(_shared(2 / 3), STOLEN, share_model=wrong)
    assert v["status"] == "miss" and "needs" in v["text"]


def test_contention_check_fails_when_the_ring_did_not_slow_down():
    # a perturbed measurement: taking half the bandwidth stretched the ring 1.2x
    v = pc.contention_verdict(_shared(2 / 3, stretch=1.2), STOLEN)
    assert v["status"] == "miss"


def test_contention_check_is_noisy_on_a_busy_machine():
    v = pc.contention_verdict(_shared(2 / 3, jitter_s=0.08), STOLEN)
    assert v["status"] == "busy"


def test_contention_check_rejects_bad_arguments():
    with pytest.raises(ValueError, match="stolen_share"):
        pc.contention_verdict(_shared(2 / 3), 0.0)
    with pytest.raises(ValueError, match="stolen_share"):
        pc.contention_verdict(_shared(2 / 3), 1.0)
