"""The schedules' bubble check: it accepts the rules and rejects wrong physics.

The runs here are made, not measured: each schedule's timeline is played by the
book's rules with a known noise (every pass starting late, one stage's passes
overrunning), then stamped pad by pad as ``schedules_worker`` stamps them. The
real run is ``tests/distributed/test_pipeline_schedules.py`` and Lab 11.
"""

import pandas as pd
import pytest

from clusterlab.models.pipeline_orders import play_schedule, schedule_order
from clusterlab.models.pipeline_schedules import play_actions
from clusterlab.pipeline import check_schedules as cs
from clusterlab.pipeline import schedules as ps

W, M = 2, 4
PADS = {  # F : B : W = 1 : 2 : 1 s, the last block 1.5 times heavier
    "f_s": [0.03] * 3 + [0.045],
    "b_s": [0.06] * 3 + [0.09],
    "w_s": [0.03] * 3 + [0.045],
}


def _stamps(name, tl):
    """The pads a worker would stamp for one played schedule, from each start."""
    pads = ps.block_pads(2 * W, **PADS)
    blocks = 2 // ps.PIPELINING_SCHEDULES[name][1]
    events = []
    for r in tl.itertuples():
        ids = [r.chunk * blocks + j for j in range(blocks)]
        if r.phase == "fwd":
            parts = [(i, "fwd") for i in ids]
        elif name in ("1f1b", "interleaved_1f1b"):  # a whole backward
            parts = [(i, ph) for i in reversed(ids) for ph in ("bwd", "wgt")]
        else:
            parts = [(i, r.phase) for i in ids]
        t = r.start
        for i, ph in parts:
            dt = pads[i][("fwd", "bwd", "wgt").index(ph)]
            events.append((r.stage, i, ph, t, t + dt))
            t += dt
    return events


def _run(delay_s=0.001, over_s=0.0005, model=play_schedule):
    """Worker-style results of every schedule, played with a known noise.

    Every pass starts ``delay_s`` late; the last stage's passes overrun their
    pads by ``over_s`` (the stamps end on time; the rank lost the rest).
    """
    out = [[] for _ in range(W)]
    for name, (_, v, _, rule) in ps.PIPELINING_SCHEDULES.items():
        fwd, bwd, wgt = ps.stage_pads(name, W, **PADS)
        fwd[-1], bwd[-1], wgt[-1] = fwd[-1] + over_s, bwd[-1] + over_s, wgt[-1] + over_s
        tl = model(rule, W, M, chunks=v, fwd_s=fwd, bwd_s=bwd, wgt_s=wgt,
                   delay_s=delay_s)  # fmt: skip
        stamps = _stamps(name, tl)
        for r in range(W):
            events = [e for e in stamps if e[0] == r]
            out[r].append({"schedule": name, "events": events, "step_s": 0.0})
    return out


@pytest.fixture(scope="module")
def run():
    return _run()


def unsplit(rule, ranks, m, *, chunks, fwd_s, bwd_s, wgt_s, delay_s=0.0):
    """Wrong physics: the split backward played as a whole one (ZB as 1F1B)."""
    orders = schedule_order(rule, ranks, m, chunks)
    whole = {
        r: [(s, "B" if k == "I" else k, i) for s, k, i in acts if k != "W"]
        for r, acts in orders.items()
    }
    return play_actions(whole, fwd_s, bwd_s, wgt_s, delay_s=delay_s)


def equal_stages(rule, ranks, m, *, fwd_s, bwd_s, wgt_s, **kw):
    """Wrong physics: blind to the heavier last stage (all as light as the first)."""
    return play_schedule(
        rule, ranks, m, fwd_s=fwd_s[0], bwd_s=bwd_s[0], wgt_s=wgt_s[0], **kw
    )


def no_turn(rule, ranks, m, **kw):
    """Wrong physics: the V's turn ignored (ZB-V played as the loop's ZB-H1)."""
    return play_schedule("zb_h1" if rule == "zbv" else rule, ranks, m, **kw)


def test_the_stamps_read_back_as_the_played_passes(run):
    for name in ps.PIPELINING_SCHEDULES:
        acts = ps.schedule_actions(run, name, **PADS)
        kinds = set(acts["kind"])
        split = name in ("interleaved_zb", "zbv")
        assert kinds == ({"F", "I", "W"} if split else {"F", "B"}), name
        # every pass lost the delay, and the last stage's its overrun too
        lost = ps.pass_delays(acts)
        assert lost.min() == pytest.approx(0.001, abs=1e-9)
        assert 0.001 + 0.0005 - 1e-9 <= lost.max() <= 0.001 + 2 * 0.0005 + 1e-9


def test_the_rules_fit_their_own_noisy_run(run):
    table = cs.schedule_bubble_verdict(ps.compare_schedules(run, **PADS))
    assert (table["verdict"] == "fits").all(), table
    assert (table["measured"] > table["predicted"]).all()  # noise adds idle time
    assert (table["held_measured"] == table["held_predicted"]).all()
    band, gap, pair = cs.schedule_band(table)
    assert band < gap and set(pair) == {"interleaved_1f1b", "interleaved_zb"}


@pytest.mark.parametrize(
    ("model", "verdict", "schedules"),
    [
        (unsplit, "below", {"interleaved_zb", "zbv"}),
        (equal_stages, "above", set(ps.PIPELINING_SCHEDULES)),
        (no_turn, "below", {"zbv"}),
    ],
)
def test_wrong_physics_fails_on_the_same_run(run, model, verdict, schedules):
    table = cs.schedule_bubble_verdict(ps.compare_schedules(run, **PADS, model=model))
    assert set(table.loc[table.verdict == verdict, "schedule"]) == schedules, table
    assert set(table.loc[table.verdict == "fits", "schedule"]).isdisjoint(schedules)


def test_the_check_fails_at_once_when_the_split_backward_is_ignored(run):
    calls = []

    def measure():
        calls.append(1)
        return ps.compare_schedules(run, **PADS, model=unsplit)

    with pytest.raises(AssertionError, match="noise only adds idle"):
        cs.check_schedule_bubbles(measure, tries=3)
    assert len(calls) == 1


def test_the_check_fails_after_bounded_tries_when_blind_to_the_heavy_stage(run, capsys):
    with pytest.raises(AssertionError, match="missed on all 2 tries"):
        cs.check_schedule_bubbles(
            lambda: ps.compare_schedules(run, **PADS, model=equal_stages), tries=2
        )
    assert "measuring again" in capsys.readouterr().out


def test_the_check_passes_the_rules_and_says_when_too_busy_to_decide(run, capsys):
    table = cs.check_schedule_bubbles(lambda: ps.compare_schedules(run, **PADS))
    assert table["decided"].all() and (table["verdict"] == "fits").all()
    # Every pass 15 ms late: the noise band is wider than the schedules' gaps.
    busy = _run(delay_s=0.015)
    table = cs.check_schedule_bubbles(
        lambda: ps.compare_schedules(busy, **PADS), tries=2
    )
    assert not table["decided"].any() and (table["verdict"] == "undecided").all()
    assert "undecided" in capsys.readouterr().out


def test_a_wrong_table_fails_and_a_measurement_above_its_noise_misses(run):
    table = ps.compare_schedules(run, **PADS)
    # "zero bubble helps nothing": every schedule predicted at 1F1B's bubble
    wrong = table.assign(predicted=table.predicted.iloc[0])
    assert (cs.schedule_bubble_verdict(wrong).verdict == "below").sum() == 3
    # idle time the run's noise does not explain
    late = table.assign(measured=table.measured + table.allowance + 0.015)
    assert (cs.schedule_bubble_verdict(late).verdict == "above").all()


def test_an_allowance_not_below_the_gap_is_refused(run):
    table = ps.compare_schedules(run, **PADS)
    band, gap, _ = cs.schedule_band(table)
    with pytest.raises(ValueError, match="not below the smallest gap"):
        cs.schedule_bubble_verdict(table, allowance=0.12)  # the old 12 points
    floors = 2 * cs.SCHEDULE_FLOOR  # one either side
    with pytest.raises(ValueError, match="interleaved_1f1b and interleaved_zb"):
        cs.schedule_bubble_verdict(table, allowance=gap - floors)
    ok = cs.schedule_bubble_verdict(table, allowance=gap - floors - 1e-3)
    assert (ok.verdict == "fits").all()
    # a table without its own gaps takes them from its predictions
    bare = table.drop(columns=["gap", "nearest"])
    assert cs.schedule_band(bare)[1] == pytest.approx(gap)


def test_bad_arguments_are_named(run):
    table = ps.compare_schedules(run, **PADS)
    with pytest.raises(ValueError, match="allowance=2"):
        cs.schedule_bubble_verdict(table, allowance=2)
    with pytest.raises(ValueError, match="measured"):
        cs.schedule_bubble_verdict(table.drop(columns="measured"))
    with pytest.raises(ValueError, match="allowance"):
        cs.schedule_band(table.drop(columns="allowance"))
    with pytest.raises(ValueError, match="quantile=0.2"):
        ps.compare_schedules(run, **PADS, quantile=0.2)
    with pytest.raises(ValueError, match="must all be > 0"):
        ps.compare_schedules(run, f_s=0.0, b_s=0.06, w_s=0.03)
    with pytest.raises(ValueError, match="f_s has 3 pads"):
        ps.block_pads(4, [0.01] * 3, 0.01, 0.01)
    with pytest.raises(ValueError, match="results hold"):
        ps.compare_schedules([per_rank[:2] for per_rank in run], **PADS)
    assert isinstance(ps.predict_schedules(W, M, **PADS), pd.DataFrame)
