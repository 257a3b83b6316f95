"""The schedules' own rules: their orders, their closed forms, their invariants.

``cl.models.pipeline_orders`` writes each rank's order from the papers' rules;
the lists below are what PyTorch 2.13's ``torch.distributed.pipelining``
publishes for the same schedules (``pipeline_order``), kept here as data: the
model never reads them, the tests compare it with them.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterlab.models.pipeline import bubble_fraction, simulated_bubble
from clusterlab.models.pipeline_orders import (
    bubble_gaps,
    play_schedule,
    schedule_order,
    stage_ranks,
)
from clusterlab.models.pipeline_schedules import (
    held_activations,
    parse_actions,
    zb_h1_bubble_fraction,
)
from clusterlab.pipeline.ranks import stage_schedule

TORCH = {
    ("1f1b", 2, 4): {
        0: "0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3",
        1: "1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3",
    },
    ("zb_h1", 2, 4): {
        0: "0F0 0F1 2F0 2F1 2I0 2W0 0F2 2I1 2W1 0F3 0I0 0W0 2F2 0I1 0W1 2F3 2I2 "
        "2W2 2I3 2W3 0I2 0W2 0I3 0W3",
        1: "1F0 1F1 3F0 3I0 3F1 3I1 3W0 1F2 1I0 3W1 1F3 1I1 1W0 3F2 3I2 1W1 3F3 3I3 "
        "3W2 1I2 3W3 1I3 1W2 1W3",
    },
    ("zbv", 2, 4): {
        0: "0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0I0 0W0 3F2 3I2 3W2 0I1 0W1 3F3 "
        "3I3 3W3 0I2 0W2 0I3 0W3",
        1: "1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3 2I2 2W2 "
        "1I2 2I3 1I3 1W2 2W3 1W3",
    },
    ("1f1b", 4, 8): {
        2: "2F0 2F1 2F2 2F3 6F0 6F1 6F2 6B0 6F3 6B1 2F4 6B2 2F5 6B3 2F6 2B0 2F7 2B1 "
        "6F4 2B2 6F5 2B3 6F6 6B4 6F7 6B5 6B6 6B7 2B4 2B5 2B6 2B7",
    },
    ("zb_h1", 4, 8): {
        1: "1F0 1F1 1F2 1F3 5F0 5F1 5F2 5I0 5F3 5I1 5W0 1F4 5I2 5W1 1F5 5I3 5W2 1F6 "
        "1I0 5W3 1F7 1I1 1W0 5F4 1I2 1W1 5F5 1I3 1W2 5F6 5I4 1W3 5F7 5I5 5W4 5I6 "
        "5W5 5I7 5W6 1I4 5W7 1I5 1W4 1I6 1W5 1I7 1W6 1W7",
    },
    ("zbv", 4, 8): {
        1: "1F0 1F1 1F2 1F3 1F4 6F0 1F5 6F1 6I0 6W0 6F2 6I1 6W1 6F3 6I2 6W2 1F6 1I0 "
        "1W0 6F4 6I3 6W3 1F7 1I1 1W1 6F5 6I4 6W4 1I2 1W2 6F6 6I5 6W5 1I3 1W3 6F7 "
        "6I6 6W6 1I4 6I7 1I5 1W4 1I6 1W5 1I7 1W6 6W7 1W7",
        3: "3F0 4F0 3F1 4F1 3F2 4F2 3F3 4F3 4I0 4W0 3F4 3I0 3W0 4F4 4I1 4W1 3F5 3I1 "
        "3W1 4F5 4I2 4W2 3F6 3I2 3W2 4F6 4I3 4W3 3F7 3I3 3W3 4F7 4I4 4W4 3I4 4I5 "
        "3I5 4I6 3I6 4I7 3I7 3W4 4W5 4W6 4W7 3W5 3W6 3W7",
    },
    ("zbv", 2, 3): {  # fewer micro-batches than the V needs: the same order, cut
        1: "1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1I1 2I2 1I2 1W1 2W2 1W2",
    },
}


@pytest.mark.parametrize("key", list(TORCH))
def test_the_rules_give_the_orders_pytorch_publishes(key):
    schedule, p, m = key
    ours = schedule_order(schedule, p, m, chunks=2)
    for rank, actions in TORCH[key].items():
        assert ours[rank] == parse_actions(actions.split()), (key, rank)


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (3, 5)])
def test_one_chunk_1f1b_is_the_hand_written_pipelines_order(p, m):
    kind = {"fwd": "F", "bwd": "B"}
    ours = schedule_order("1f1b", p, m)
    for s in range(p):
        assert ours[s] == [
            (s, kind[ph], i) for ph, i in stage_schedule("1f1b", p, m, s)
        ]


def _idle(tl):
    makespan = tl["end"].max() - tl["start"].min()
    return makespan - (tl["end"] - tl["start"]).groupby(tl["stage"]).sum()


FBW = [(1.0, 1.0, 1.0), (1.0, 2.0, 1.0), (1.0, 1.5, 0.5), (2.0, 1.0, 1.0)]


@pytest.mark.parametrize(("p", "m"), [(2, 4), (3, 6), (4, 8), (4, 4), (5, 7)])
@pytest.mark.parametrize(("f", "b", "w"), FBW)
def test_equal_stages_give_qi_et_al_idle_time(p, m, f, b, w):
    one_f_one_b = play_schedule("1f1b", p, m, fwd_s=f, bwd_s=b, wgt_s=w)
    zb_h1 = play_schedule("zb_h1", p, m, fwd_s=f, bwd_s=b, wgt_s=w)
    # Qi et al. 2024: 1F1B idles (p-1)(F+B+W) per stage, ZB-H1 (p-1)(F+B-W).
    assert _idle(one_f_one_b).tolist() == pytest.approx([(p - 1) * (f + b + w)] * p)
    assert _idle(zb_h1).tolist() == pytest.approx([(p - 1) * (f + b - w)] * p)
    assert simulated_bubble(zb_h1) == pytest.approx(
        zb_h1_bubble_fraction(p, m, f, b, w)
    )
    # ZB-H1 keeps 1F1B's memory: no rank holds more than p micro-batches.
    assert held_activations(zb_h1).tolist() == [min(p, m)] * p


@pytest.mark.parametrize(("p", "m"), [(2, 4), (2, 8), (4, 8), (3, 9), (4, 16)])
def test_interleaving_gives_the_interleaved_bubble_and_memory(p, m):
    tl = play_schedule("1f1b", p, m, chunks=2, fwd_s=1.0, bwd_s=1.0, wgt_s=1.0)
    assert simulated_bubble(tl) == pytest.approx(bubble_fraction(p, m, interleave=2))
    assert held_activations(tl).max() == pytest.approx(p + (p - 1) / 2)
    zbv = play_schedule("zbv", p, m, chunks=2, fwd_s=1.0, bwd_s=1.0, wgt_s=1.0)
    assert held_activations(zbv).tolist() == [p] * p  # 1F1B's memory on every rank
    assert simulated_bubble(zbv) < simulated_bubble(tl)


def _valid(tl, owner):
    """Every pass once, each after its input, one at a time per rank."""
    end = {(r.phase, r.chunk, r.microbatch): r.end for r in tl.itertuples()}
    last = len(owner) - 1
    for r in tl.itertuples():
        if owner[r.chunk] != r.stage:
            return False
        if r.phase == "fwd":
            need = end.get(("fwd", r.chunk - 1, r.microbatch), 0.0) if r.chunk else 0.0
        elif r.phase == "wgt":
            need = end[("bwd", r.chunk, r.microbatch)]
        elif r.chunk < last:
            need = end[("bwd", r.chunk + 1, r.microbatch)]
        else:
            need = end[("fwd", r.chunk, r.microbatch)]
        if r.start < need - 1e-12:
            return False
    for _, g in tl.sort_values("start").groupby("stage"):
        if (g["start"].to_numpy()[1:] < g["end"].to_numpy()[:-1] - 1e-12).any():
            return False
    return True


LAYOUTS = [("1f1b", 1), ("1f1b", 2), ("zb_h1", 1), ("zb_h1", 2), ("zbv", 2)]


@pytest.mark.parametrize(("schedule", "v"), LAYOUTS)
def test_every_schedule_is_a_valid_timeline_with_a_heavy_last_stage(schedule, v):
    p, m = 3, 6
    n = p * v
    fwd = [1.0] * (n - 1) + [2.0]
    tl = play_schedule(schedule, p, m, chunks=v, fwd_s=fwd, bwd_s=2.0, wgt_s=0.5)
    kinds = 3 if schedule != "1f1b" else 2
    assert len(tl) == kinds * n * m
    assert _valid(tl, stage_ranks(schedule, p, v))
    shifted = tl.copy()
    shifted.loc[shifted.index[-1], "start"] -= 5.0  # a pass before its input
    assert not _valid(shifted, stage_ranks(schedule, p, v))


@settings(max_examples=40, deadline=None)
@given(
    layout=st.sampled_from(LAYOUTS),
    stage=st.integers(0, 3),
    slower=st.floats(0.0, 2.0),
    delay=st.floats(0.0, 0.5),
)
def test_the_step_never_shortens_when_a_stage_slows_or_passes_start_late(
    layout, stage, slower, delay
):
    schedule, v = layout
    p, m = 2, 4
    base = [1.0] * (p * v)
    slow = list(base)
    slow[stage % (p * v)] += slower

    def step(fwd, d):
        tl = play_schedule(schedule, p, m, chunks=v, fwd_s=fwd, bwd_s=1.5, wgt_s=0.5,
                           delay_s=d)  # fmt: skip
        return tl["end"].max()

    assert step(slow, 0.0) >= step(base, 0.0) - 1e-12
    assert step(base, delay) >= step(base, 0.0) - 1e-12


def test_a_heavier_last_stage_raises_every_schedules_bubble():
    for schedule, v in LAYOUTS:
        n = 2 * v
        even = play_schedule(schedule, 2, 4, chunks=v, fwd_s=1.0, bwd_s=2.0, wgt_s=1.0)
        heavy = [1.0] * (n - 1) + [1.5]
        tl = play_schedule(schedule, 2, 4, chunks=v, fwd_s=heavy,
                           bwd_s=[2 * t for t in heavy], wgt_s=heavy)  # fmt: skip
        assert simulated_bubble(tl) > simulated_bubble(even), schedule


def test_layouts():
    assert stage_ranks("1f1b", 3, 2) == [0, 1, 2, 0, 1, 2]
    assert stage_ranks("zbv", 3, 2) == [0, 1, 2, 2, 1, 0]


def test_bubble_gaps_name_the_nearest_schedule():
    gaps = bubble_gaps({"a": 0.25, "b": 0.18, "c": 0.14, "d": 0.10})
    assert gaps["gap"].round(6).tolist() == [0.07, 0.04, 0.04, 0.04]
    assert gaps["nearest"].tolist() == ["b", "c", "b", "c"]
    with pytest.raises(ValueError, match="two or more"):
        bubble_gaps({"a": 0.2})


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="schedule='gpipe'"):
        schedule_order("gpipe", 2, 4)
    with pytest.raises(ValueError, match="chunks=3"):
        schedule_order("zbv", 2, 4, chunks=3)
    with pytest.raises(ValueError, match="microbatches=5 must be a multiple"):
        schedule_order("zb_h1", 2, 5, chunks=2)
    with pytest.raises(ValueError, match="ranks=0"):
        play_schedule("1f1b", 0, 4)
    with pytest.raises(ValueError, match="fwd_s has 3 times"):
        play_schedule("1f1b", 2, 4, fwd_s=[1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"bwd_s\[1\]=0"):
        play_schedule("1f1b", 2, 4, bwd_s=[1.0, 0.0])
    with pytest.raises(ValueError, match="delay_s=-1"):
        play_schedule("1f1b", 2, 4, delay_s=-1.0)
