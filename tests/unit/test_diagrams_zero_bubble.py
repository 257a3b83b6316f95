"""The zero-bubble schedule the pipeline diagram draws: valid, and smaller."""

from __future__ import annotations

import pytest

from clusterlab.models.pipeline import simulate_schedule, simulated_bubble
from clusterlab.models.pipeline_schedules import zero_bubble_schedule


def _respects_dependencies(df, p) -> bool:
    end = {(r.phase, r.stage, r.microbatch): r.end for r in df.itertuples()}
    for r in df.itertuples():
        if r.phase == "fwd" and r.stage > 0:
            need = end[("fwd", r.stage - 1, r.microbatch)]
        elif r.phase == "bwd":
            key = ("bwd", r.stage + 1, r.microbatch) if r.stage < p - 1 else None
            need = end[key] if key else end[("fwd", r.stage, r.microbatch)]
        elif r.phase == "wgt":
            need = end[("bwd", r.stage, r.microbatch)]
        else:
            need = 0.0
        if r.start < need - 1e-12:
            return False
    ops = df.sort_values(["stage", "start"])
    overlaps = ops.groupby("stage").apply(
        lambda g: (g["start"].values[1:] < g["end"].values[:-1] - 1e-12).any(),
        include_groups=False,
    )
    return not overlaps.any()


@pytest.mark.parametrize("p,m", [(2, 4), (4, 8), (4, 4)])
def test_zero_bubble_is_valid_and_beats_1f1b(p, m):
    zb = zero_bubble_schedule(p, m)
    assert len(zb) == 3 * p * m and _respects_dependencies(zb, p)
    one_f_one_b = simulate_schedule(p, m, "1f1b", fwd_time=1.0, bwd_time=2.0)
    assert simulated_bubble(zb) < simulated_bubble(one_f_one_b)


def test_the_dependency_check_fails_on_a_shifted_schedule():
    zb = zero_bubble_schedule(4, 8)
    wrong = zb.copy()
    first_bwd = wrong.index[(wrong["phase"] == "bwd") & (wrong["stage"] == 0)][0]
    wrong.loc[first_bwd, ["start", "end"]] -= 5.0
    assert not _respects_dependencies(wrong, 4)
