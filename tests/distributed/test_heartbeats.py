"""Wall-clock and monotonic heartbeat detectors across real processes, under skew."""

import pytest

from clusterlab.clocks import heartbeats
from clusterlab.clocks.heartbeat_check import (
    check_heartbeat_detectors,
    measure_heartbeats,
)
from clusterlab.clocks.heartbeats import WallClockDetector

pytestmark = [
    pytest.mark.timing,
    pytest.mark.dist,
    pytest.mark.usefixtures("no_leftover_processes"),
]

SHORT = dict(live_s=0.5, silent_s=0.15)


def _quiet(_):
    pass


def test_17_ms_of_skew_fools_the_wall_clock_detector_and_not_the_monotonic_one():
    runs = measure_heartbeats((0.0, 17e-3), say=_quiet, **SHORT)
    check_heartbeat_detectors(runs)
    by = runs.set_index(["skew_s", "observer", "detector"])
    ahead = by.loc[(0.017, 1, "wall clock")]
    # The age peaks at 20 ms + 17 ms > 35 ms: a suspicion in every interval.
    assert ahead["clock_suspicions"] >= 1
    assert (runs[runs["detector"] == "monotonic"]["clock_suspicions"] == 0).all()
    # A clock behind the sender's notices a real silence late, one ahead early.
    behind = by.loc[(0.017, 0, "wall clock")]
    assert behind["detect_after_s"] > 0.035 + 0.017 - 1e-3
    assert ahead["detect_after_s"] < 0.035


def test_heartbeat_check_fails_when_the_skew_is_removed_from_the_clocks(monkeypatch):
    class TrueClock(heartbeats.SkewedClock):
        def __init__(self, offset_s=0.0, drift_ppm=0.0):
            super().__init__(0.0, 0.0)  # ignores the skew it was given

    # Ranks are forked, so they inherit the patched module.
    monkeypatch.setattr(heartbeats, "SkewedClock", TrueClock)
    runs = measure_heartbeats((0.0, 17e-3), say=_quiet, **SHORT)
    with pytest.raises(AssertionError, match="Did the skew reach"):
        check_heartbeat_detectors(runs)


def test_heartbeat_check_fails_when_the_monotonic_detector_reads_the_stamps():
    wrong = {"wall clock": WallClockDetector, "monotonic": WallClockDetector}
    runs = measure_heartbeats((0.0, 17e-3), say=_quiet, detectors=wrong, **SHORT)
    with pytest.raises(AssertionError, match="must not read the sender's clock"):
        check_heartbeat_detectors(runs)
