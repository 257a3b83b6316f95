"""Mixed-speed ranks on a real group: every rank's step waits for the slowest."""

import pytest

from clusterlab.interconnects import measure as pc
from clusterlab.ring import measure as rh

pytestmark = [
    pytest.mark.timing,
    pytest.mark.dist,
    pytest.mark.usefixtures("no_leftover_processes"),
]


def test_an_equal_split_waits_for_the_slowest_rank():
    work_s, speeds = 0.01, [0.5, 1.0, 1.0]
    df = pc.measure_mixed_step(speeds, work_s, repeats=2)
    best = rh.summarize_timings(df)["best_s"]
    # sleeps never end early: the slow rank's 20 ms bounds every equal step
    assert best["equal split"] >= work_s / 0.5
    assert best["split by speed"] >= 3 * work_s / 2.5
    assert set(df["case"]) == set(pc.MIXED_CASES) and len(df) == 3 * 2
    assert df.attrs["speeds"] == speeds and df.attrs["overshoot_s"] >= 0


def test_mixed_step_arguments_are_validated():
    with pytest.raises(ValueError, match="speeds"):
        pc.measure_mixed_step([1.0, 0.0])
    with pytest.raises(ValueError, match="len\\(speeds\\)"):
        pc.measure_mixed_step([1.0])
