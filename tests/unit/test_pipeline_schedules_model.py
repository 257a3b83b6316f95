"""Playing schedules' action lists, held activations, and the (v, m) exercise."""

import pytest

import clusterlab as cl
from clusterlab.models.pipeline import bubble_fraction, simulated_bubble
from clusterlab.models.pipeline_schedules import (
    held_activations,
    parse_actions,
    play_actions,
)
from clusterlab.pipeline.answer import choose_schedule
from clusterlab.pipeline.ranks import stage_schedule

# torch's ScheduleInterleaved1F1B and ScheduleZBVZeroBubble, W = 2, m = 4
INTERLEAVED = {
    0: "0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3",
    1: "1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3",
}
ZBV = {
    0: "0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0I0 0W0 3F2 3I2 3W2 0I1 0W1 3F3 "
    "3I3 3W3 0I2 0W2 0I3 0W3",
    1: "1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3 2I2 2W2 "
    "1I2 2I3 1I3 1W2 2W3 1W3",
}


def _one_f_one_b(p, m):
    kind = {"fwd": "F", "bwd": "B"}
    return {
        s: [(s, kind[ph], i) for ph, i in stage_schedule("1f1b", p, m, s)]
        for s in range(p)
    }


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (3, 5)])
def test_playing_1f1b_gives_the_closed_form_bubble(p, m):
    sim = play_actions(_one_f_one_b(p, m), 1.0, 1.0, 1.0)
    assert simulated_bubble(sim) == pytest.approx(bubble_fraction(p, m))
    assert held_activations(sim).tolist() == [min(p - s, m) for s in range(p)]


def test_playing_interleaved_gives_the_interleaved_bubble():
    orders = {r: parse_actions(a.split()) for r, a in INTERLEAVED.items()}
    sim = play_actions(orders, 1.0, 1.0, 1.0)
    assert simulated_bubble(sim) == pytest.approx(bubble_fraction(2, 4, interleave=2))
    assert held_activations(sim).max() == 2.5  # p + (p - 1)/v


def test_zbv_bubble_is_below_interleaved_at_equal_f_b_w():
    orders = {r: parse_actions(a.split()) for r, a in ZBV.items()}
    sim = play_actions(orders, 1.0, 1.0, 1.0)
    assert simulated_bubble(sim) < bubble_fraction(2, 4, interleave=2) / 2
    # with W free, the split buys nothing: the B passes carry the whole bubble
    slow_w = simulated_bubble(play_actions(orders, 1.0, 1.0, 1e-6))
    assert slow_w > simulated_bubble(sim)
    assert held_activations(sim).max() == 2.0  # ZB-V keeps 1F1B's memory


def test_parse_drops_what_is_not_computation():
    got = parse_actions(["0F0", "2I1", "0W3", "1B2", "0REDUCE_GRAD", None])
    assert got == [(0, "F", 0), (2, "I", 1), (0, "W", 3), (1, "B", 2)]


def test_play_refuses_a_deadlock_and_bad_times():
    with pytest.raises(ValueError, match="deadlock"):
        play_actions({0: [(0, "B", 0)], 1: [(1, "F", 0)]})
    with pytest.raises(ValueError, match="f=0"):
        play_actions({0: [(0, "F", 0)]}, f=0)


def test_play_takes_a_time_per_stage_and_a_delay_per_action():
    orders = _one_f_one_b(2, 2)
    even = play_actions(orders, 1.0, 1.0, 1.0)
    heavy = play_actions(orders, [1.0, 2.0], [1.0, 2.0], {0: 1.0, 1: 2.0})
    assert heavy["end"].max() > even["end"].max()
    busy = (heavy.end - heavy.start).groupby(heavy.stage).sum().tolist()
    assert busy == [2 * 3.0, 2 * 6.0]  # F + B (= b + w) per micro-batch
    late = play_actions(orders, 1.0, 1.0, 1.0, delay_s=0.5)
    # rank 0's first pass waits for nothing; every later one starts 0.5 late
    assert late["start"].min() == 0.0
    assert late["end"].max() > even["end"].max()
    with pytest.raises(ValueError, match="give one for each stage 0 .. 1"):
        play_actions(orders, [1.0], 1.0, 1.0)
    with pytest.raises(ValueError, match="delay_s=-1"):
        play_actions(orders, delay_s=-1.0)
    # a delay per kind of pass: late backwards lengthen the step, late F alone less
    late_b = play_actions(orders, 1.0, 1.0, 1.0, delay_s={"B": 0.5})
    assert even["end"].max() < late_b["end"].max() < late["end"].max()
    with pytest.raises(ValueError, match="delay_s has kinds"):
        play_actions(orders, delay_s={"X": 0.5})


def test_choose_schedule_check_passes_the_solution(capsys):
    assert cl.pipeline.check_schedules.choose_schedule(choose_schedule)
    assert "\u2714" in capsys.readouterr().out


def test_choose_schedule_check_fails_when_the_cap_is_ignored():
    def ignores_cap(p, max_m, cap, max_v):
        return max_v, max_m - max_m % p

    with pytest.raises(AssertionError, match="over the cap"):
        cl.pipeline.check_schedules.choose_schedule(ignores_cap)


def test_choose_schedule_check_says_not_attempted(capsys):
    def stub(*args):
        raise NotImplementedError

    cl.pipeline.check_schedules.choose_schedule(stub)
    assert "not attempted" in capsys.readouterr().out


def test_zb_h1_leaves_a_third_of_1f1b_idle_time_at_equal_passes():
    from clusterlab.models.pipeline_schedules import zb_h1_bubble_fraction

    p, m = 4, 8
    one_f_one_b_idle = bubble_fraction(p, m) / (1 - bubble_fraction(p, m))
    zb_idle = zb_h1_bubble_fraction(p, m) / (1 - zb_h1_bubble_fraction(p, m))
    assert zb_idle == pytest.approx(one_f_one_b_idle / 3)  # idle over busy time
    with pytest.raises(ValueError, match="microbatches=2"):
        zb_h1_bubble_fraction(4, 2)
    with pytest.raises(ValueError, match="w=3"):
        zb_h1_bubble_fraction(4, 8, 1, 1, 3)
