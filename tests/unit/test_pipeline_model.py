import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterlab.models.pipeline import (
    bubble_fraction,
    peak_in_flight,
    simulate_schedule,
    simulated_bubble,
)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_closed_form_matches_simulation_for_p_2_to_8_and_m_1_to_32(schedule):
    for p in range(2, 9):
        for m in range(1, 33):
            sim = simulated_bubble(simulate_schedule(p, m, schedule))
            assert sim == pytest.approx(bubble_fraction(p, m, schedule), abs=1e-12), (
                schedule,
                p,
                m,
            )


@pytest.mark.parametrize("v", [2, 3, 4])
@pytest.mark.parametrize("p", [2, 4, 8])
def test_interleaved_closed_form_matches_simulation(v, p):
    for m in (p, 2 * p, 4 * p):
        sim = simulated_bubble(simulate_schedule(p, m, "1f1b", interleave=v))
        assert sim == pytest.approx(bubble_fraction(p, m, "1f1b", v), abs=1e-12)


def test_hand_computed_bubbles():
    assert bubble_fraction(4, 8) == pytest.approx(3 / 11)
    assert bubble_fraction(4, 8, interleave=2) == pytest.approx(3 / 19)
    assert bubble_fraction(1, 5) == 0.0
    # Makespan of GPipe: (m + p - 1) forwards plus (m + p - 1) backwards.
    df = simulate_schedule(4, 8, "gpipe", fwd_time=1, bwd_time=2)
    assert df["end"].max() == pytest.approx(11 * 3)
    assert len(df) == 4 * 8 * 2


@given(
    p=st.integers(1, 8),
    m=st.integers(1, 32),
    tf=st.floats(0.1, 5),
    tb=st.floats(0.1, 5),
    schedule=st.sampled_from(["gpipe", "1f1b"]),
)
def test_bubble_does_not_depend_on_op_times(p, m, tf, tb, schedule):
    df = simulate_schedule(p, m, schedule, fwd_time=tf, bwd_time=tb)
    assert simulated_bubble(df) == pytest.approx(bubble_fraction(p, m), abs=1e-9)


@given(p=st.integers(1, 8), m=st.integers(1, 32))
def test_bubble_falls_with_microbatches_and_rises_with_stages(p, m):
    assert bubble_fraction(p, m + 1) <= bubble_fraction(p, m)
    assert bubble_fraction(p + 1, m) > bubble_fraction(p, m)


def test_schedule_respects_dependencies():
    df = simulate_schedule(4, 6, "1f1b").set_index(["stage", "microbatch", "phase"])
    for mb in range(6):
        for s in range(1, 4):
            assert df.loc[(s, mb, "fwd"), "start"] >= df.loc[(s - 1, mb, "fwd"), "end"]
            assert df.loc[(s - 1, mb, "bwd"), "start"] >= df.loc[(s, mb, "bwd"), "end"]


def test_1f1b_holds_at_most_p_microbatches_gpipe_holds_m():
    assert peak_in_flight(simulate_schedule(4, 8, "1f1b")).tolist() == [4, 3, 2, 1]
    assert peak_in_flight(simulate_schedule(4, 8, "gpipe")).tolist() == [8] * 4
    assert peak_in_flight(simulate_schedule(4, 2, "1f1b")).max() == 2


@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(stages=0, microbatches=4), "stages"),
        (dict(stages=2, microbatches=0), "microbatches"),
        (dict(stages=2, microbatches=4, schedule="zb"), "schedule"),
        (dict(stages=2, microbatches=4, interleave=0), "interleave"),
        (dict(stages=2, microbatches=4, schedule="gpipe", interleave=2), "interleave"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, word):
    with pytest.raises(ValueError, match=word):
        bubble_fraction(**kwargs)
    with pytest.raises(ValueError, match=word):
        simulate_schedule(**kwargs)


def test_interleave_needs_a_multiple_of_stages():
    with pytest.raises(ValueError, match="multiple"):
        simulate_schedule(4, 6, "1f1b", interleave=2)
    with pytest.raises(ValueError, match="microbatches=6 must be a multiple"):
        bubble_fraction(4, 6, "1f1b", interleave=2)
    assert bubble_fraction(4, 6, "1f1b") == pytest.approx(3 / 9)  # v = 1: any m


def test_sweeps_for_charts_live_in_models():
    from clusterlab.models.pipeline_sweeps import bubble_curve, schedule_sweep

    curve = bubble_curve(4, 8)
    assert curve["bubble"].iloc[-1] == pytest.approx(3 / 11)
    assert bubble_curve(4, 8, interleave=2)["microbatches"].tolist() == [4, 8]
    ops, notes = schedule_sweep(4, 4)
    one = ops[ops.key == "1F1B|4|4"]
    assert len(one) == 2 * 4 * 4
    assert notes.key.is_unique
    with pytest.raises(ValueError, match="max_stages=9"):
        schedule_sweep(max_stages=9)
