"""The lossy-link detector's counting and its check, on synthetic arrivals: the
check passes heartbeats lost independently at the measured rate, and fails the
same mean loss arriving in bursts, which the closed form does not allow."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from clusterlab.failures import check, lossy


def arrivals(loss=0.3, interval=0.02, seconds=8.0, jitter=0.0005, bursty=False, seed=0):
    """Heartbeats every ``interval``, lost independently or in bursts."""
    rng = np.random.default_rng(seed)
    n = int(seconds / interval)
    if bursty:  # Gilbert-Elliott: a bad state that drops every packet
        stay_bad = 0.8
        enter_bad = loss * (1 - stay_bad) / (1 - loss)
        lost, bad = np.zeros(n, bool), False
        for i in range(n):
            bad = rng.random() < (stay_bad if bad else enter_bad)
            lost[i] = bad
    else:
        lost = rng.random(n) < loss
    seq = np.arange(n)[~lost]
    due = seq * interval
    received = due + 0.0002 + rng.exponential(jitter, len(seq))
    df = pd.DataFrame({"seq": seq, "due": due, "received": received})
    return {"arrivals": df, "sent": n, "interval_s": interval,
            "loss_percent": 100 * loss, "seconds": seconds}  # fmt: skip


def test_independent_losses_pass_the_check():
    table = lossy.model_table(lossy.false_alarms(arrivals(), lossy.TIMEOUTS_MS))
    assert check.false_alarms_match(table)
    assert table["measured_loss"].iloc[0] == pytest.approx(0.3, abs=0.07)  # 3 sigma
    # a timeout between 1 and 2 intervals suspects after every lost heartbeat
    # that follows a delivered one: (1 - p) p per interval
    p = table["measured_loss"].iloc[0]
    assert table["expected"].iloc[0] == pytest.approx(8 * 50 * (1 - p) * p, rel=0.01)


def test_bursts_of_the_same_mean_loss_fail_it():
    run = arrivals(bursty=True)
    table = lossy.model_table(lossy.false_alarms(run, lossy.TIMEOUTS_MS))
    assert table["measured_loss"].iloc[0] == pytest.approx(0.3, abs=0.06)
    with pytest.raises(AssertionError, match="not independent"):
        check.false_alarms_match(table)


def test_a_gap_is_counted_once_per_timeout_it_exceeds():
    run = arrivals(loss=0.0, seconds=1.0)
    run["arrivals"] = run["arrivals"].drop(index=[10, 11, 30])  # gaps of 3 and 2
    counts = lossy.false_alarms(run, [30.0, 50.0, 70.0])
    assert counts["false_alarms"].tolist() == [2, 1, 0]


def test_poisson_ranges_and_bad_input():
    assert lossy.poisson_range(0.0) == (0, 0)
    low, high = lossy.poisson_range(100.0)
    assert 60 < low < 75 and 125 < high < 140
    with pytest.raises(ValueError, match="timeout_ms"):
        lossy.false_alarms(arrivals(seconds=1.0), [0.0])
    with pytest.raises(ValueError, match="no rows"):
        check.false_alarms_match(
            pd.DataFrame(
                columns=["timeout_ms", "false_alarms", "expected", "low", "high"]
            )  # fmt: skip
        )
    with pytest.raises(SystemExit):
        lossy.main(["send", "--to", "10.0.0.1", "--port", "0", "--interval-ms",
                    "20", "--count", "1"])  # fmt: skip


def test_where_nodes_cannot_be_emulated_the_recorded_run_is_shown_and_holds(
    monkeypatch,
):
    monkeypatch.setenv("CLUSTERLAB_NO_EMULATION", "1")
    counts, note = lossy.measure_or_recorded()
    assert "recorded on" in note and "record_cluster_runs.py" in note
    assert list(counts["timeout_ms"]) == list(lossy.TIMEOUTS_MS)
    assert check.false_alarms_match(lossy.model_table(counts))
