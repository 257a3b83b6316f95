"""Heartbeat detectors under skew: the detectors, the check and the re-measuring."""

import pandas as pd
import pytest

from clusterlab.clocks import heartbeat_check
from clusterlab.clocks.heartbeat_check import (
    check_heartbeat_detectors,
    late_heartbeats,
    measure_heartbeats,
)
from clusterlab.clocks.heartbeats import (
    MonotonicDetector,
    WallClockDetector,
    run_heartbeats,
)


class FakeClock:
    def __init__(self, t=0.0):
        self.t = t

    def __call__(self):
        return self.t


def test_the_wall_clock_detector_suspects_a_live_peer_when_its_clock_leads():
    true = FakeClock(100.0)
    mine = FakeClock(100.0 + 0.017)  # this rank's clock, 17 ms ahead
    wall = WallClockDetector(0.035, mine)
    mono = MonotonicDetector(0.035, true)
    for det in (wall, mono):
        assert not det.suspects(1)  # nothing heard yet
        det.heard(1, stamp_s=100.0)  # stamped by the sender's clock
    true.t, mine.t = 100.020, 100.037  # 20 ms later, just before the next one
    assert wall.age_s(1) == pytest.approx(0.037) and wall.suspects(1)
    assert mono.age_s(1) == pytest.approx(0.020) and not mono.suspects(1)
    true.t = 100.036  # a really silent peer: the monotonic detector sees it
    assert mono.suspects(1)


def test_the_monotonic_detector_ignores_the_stamp():
    clock = FakeClock(5.0)
    mono = MonotonicDetector(0.01, clock)
    mono.heard(0, stamp_s=-1e9)  # a wildly wrong sender clock
    assert not mono.suspects(0)
    clock.t = 5.02
    assert mono.suspects(0)


def _row(skew_s, observer, detector, clock_suspicions, **kw):
    lead = skew_s if observer == 1 else -skew_s
    row = dict(
        observer=observer,
        peer=1 - observer,
        detector=detector,
        lead_s=lead,
        heartbeats=48,
        false_suspicions=clock_suspicions,
        clock_suspicions=clock_suspicions,
        late_suspicions=0,
        worst_true_age_s=0.022,
        detected=True,
        detect_after_s=0.036 if detector == "monotonic" else 0.035 - lead,
        skew_s=skew_s,
        interval_s=0.02,
        timeout_s=0.035,
        margin_s=0.015,
        tries=1,
    )
    return row | kw


def _good():
    rows = []
    for skew in (0.0, 0.017):
        for obs in (0, 1):
            for det in ("wall clock", "monotonic"):
                bites = skew > 0 and obs == 1 and det == "wall clock"
                rows.append(_row(skew, obs, det, 48 if bites else 0))
    return pd.DataFrame(rows)


def test_the_check_accepts_what_the_clocks_predict():
    check_heartbeat_detectors(_good())


def test_heartbeat_check_fails_when_the_counts_are_swapped():
    runs = _good()
    runs["detector"] = runs["detector"].map(
        {"wall clock": "monotonic", "monotonic": "wall clock"}
    )
    with pytest.raises(AssertionError, match="must not read the sender's clock"):
        check_heartbeat_detectors(runs)


def test_heartbeat_check_fails_when_the_skew_is_removed_from_the_detector():
    runs = _good()
    runs["false_suspicions"] = runs["clock_suspicions"] = 0  # as with true clocks
    with pytest.raises(AssertionError, match="Did the skew reach"):
        check_heartbeat_detectors(runs)


def test_heartbeat_check_fails_when_a_clean_run_misses_the_model_count():
    runs = _good()
    fooled = (runs["skew_s"] > 0) & (runs["observer"] == 1)
    fooled &= runs["detector"] == "wall clock"
    runs.loc[fooled, ["false_suspicions", "clock_suspicions"]] = 24  # every other
    with pytest.raises(AssertionError, match="one per heartbeat"):
        check_heartbeat_detectors(runs)
    runs.loc[fooled, "worst_true_age_s"] = 0.2  # on a busy run, fewer may come
    check_heartbeat_detectors(runs)


def test_heartbeat_check_fails_when_the_control_suspects_on_time_heartbeats():
    runs = _good()
    control = (runs["skew_s"] == 0) & (runs["detector"] == "wall clock")
    runs.loc[control, "clock_suspicions"] = 3
    with pytest.raises(AssertionError, match="With no lead"):
        check_heartbeat_detectors(runs)


def test_heartbeat_check_fails_when_the_control_run_is_missing():
    runs = _good()
    with pytest.raises(AssertionError, match="control with no skew"):
        check_heartbeat_detectors(runs[runs["skew_s"] > 0])
    with pytest.raises(AssertionError, match="beyond the 15 ms margin"):
        check_heartbeat_detectors(runs[runs["skew_s"] == 0])


def test_heartbeat_check_fails_when_a_silent_peer_goes_unnoticed_or_too_soon():
    runs = _good()
    runs.loc[3, "detected"] = False
    with pytest.raises(AssertionError, match="fell silent"):
        check_heartbeat_detectors(runs)
    runs = _good()
    runs.loc[runs["detector"] == "monotonic", "detect_after_s"] = 0.010
    with pytest.raises(AssertionError, match="sooner than the timeout"):
        check_heartbeat_detectors(runs)
    runs = _good()
    runs["heartbeats"] = 0
    with pytest.raises(AssertionError, match="heartbeats came"):
        check_heartbeat_detectors(runs)


def test_suspicions_from_late_heartbeats_do_not_fail_a_correct_detector():
    runs = _good()
    late = (runs["skew_s"] == 0) & (runs["observer"] == 0)
    runs.loc[late, ["false_suspicions", "late_suspicions"]] = 2
    runs.loc[late, "worst_true_age_s"] = 0.120
    check_heartbeat_detectors(runs)
    assert len(late_heartbeats(runs)) == 2


def test_a_busy_machine_is_named_and_measured_again_a_bounded_number_of_times(
    monkeypatch,
):
    calls = []

    def fake_run(offsets_s, **kwargs):
        calls.append(offsets_s)
        skew = offsets_s[1]
        busy = len(calls) == 1  # only the first run is spoilt
        rows = [_row(skew, o, d, 0) for o in (0, 1) for d in ("wall clock",)]
        frame = pd.DataFrame(rows).drop(columns="tries")
        if busy:
            frame["worst_true_age_s"] = 0.2
        return frame

    said = []
    monkeypatch.setattr(heartbeat_check, "run_heartbeats", fake_run)
    runs = measure_heartbeats((0.0, 0.017), say=said.append)
    assert len(calls) == 3 and list(runs["tries"].unique()) == [2, 1]
    assert "this machine was busy" in said[0] and "try 1 of 3" in said[0]
    assert "200 ms" in said[0]
    calls.clear(), said.clear()
    monkeypatch.setattr(
        heartbeat_check,
        "run_heartbeats",
        lambda offsets_s, **kw: fake_run(offsets_s).assign(worst_true_age_s=0.2),
    )
    runs = measure_heartbeats((0.0,), tries=2, say=said.append)
    assert len(said) == 2 and "undecided after 2 tries" in said[1]
    assert "counted apart (late_suspicions)" in said[1]
    assert runs["tries"].max() == 2


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="timeout_s=0.01"):
        run_heartbeats(interval_s=0.02, timeout_s=0.01)
    with pytest.raises(ValueError, match="len\\(offsets_s\\)"):
        run_heartbeats((0.0,))
    with pytest.raises(ValueError, match="silent_s"):
        run_heartbeats(silent_s=0.01)
    with pytest.raises(ValueError, match="tries"):
        measure_heartbeats(tries=0)
    with pytest.raises(ValueError, match="lacks the columns"):
        check_heartbeat_detectors(pd.DataFrame({"detector": ["monotonic"]}))
