"""Lamport and vector clocks against the happened-before relation itself."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import clusterlab as cl
from clusterlab.clocks.logical import (
    LogicalParams,
    causal_order,
    concurrent,
    happened_before,
    lamport_clocks,
    simulate_messages,
    vector_clocks,
)


@st.composite
def histories(draw, max_processes=4, max_steps=30):
    """A random, valid history: a message is received once, after it is sent."""
    n = draw(st.integers(2, max_processes))
    history, in_flight, next_msg = [], {q: [] for q in range(n)}, 0
    for _ in range(draw(st.integers(1, max_steps))):
        p = draw(st.integers(0, n - 1))
        choices = ["local", "send"] + (["recv"] if in_flight[p] else [])
        kind = draw(st.sampled_from(choices))
        if kind == "local":
            history.append((p, "local", None))
        elif kind == "send":
            dst = draw(st.sampled_from([q for q in range(n) if q != p]))
            in_flight[dst].append(next_msg)
            history.append((p, "send", next_msg))
            next_msg += 1
        else:  # messages may overtake each other: take any one in flight
            i = draw(st.integers(0, len(in_flight[p]) - 1))
            history.append((p, "recv", in_flight[p].pop(i)))
    return n, history


@settings(max_examples=100, deadline=None)
@given(histories())
def test_lamport_clocks_respect_happened_before(case):
    n, history = case
    hb = causal_order(history, n)
    lam = lamport_clocks(history, n)
    for i, j in itertools.permutations(range(len(history)), 2):
        if hb[i, j]:
            assert lam[i] < lam[j], (history, i, j, lam)


@settings(max_examples=100, deadline=None)
@given(histories())
def test_vector_clocks_order_exactly_the_causal_pairs_and_spot_concurrency(case):
    n, history = case
    hb = causal_order(history, n)
    vec = vector_clocks(history, n)
    for i, j in itertools.permutations(range(len(history)), 2):
        assert happened_before(vec[i], vec[j]) == hb[i, j], (history, i, j)
        assert concurrent(vec[i], vec[j]) == (not hb[i, j] and not hb[j, i])


@settings(max_examples=50, deadline=None)
@given(histories())
def test_a_vector_entry_counts_the_events_of_its_process(case):
    n, history = case
    vec = vector_clocks(history, n)
    seen = [0] * n
    for (p, _, _), v in zip(history, vec, strict=True):
        seen[p] += 1
        assert v[p] == seen[p]


def test_lamport_order_does_not_imply_causality():
    # Two processes that never talk: P1's later-numbered event is not caused.
    history = [(0, "local", None), (1, "local", None), (1, "local", None)]
    lam = lamport_clocks(history, 2)
    vec = vector_clocks(history, 2)
    assert lam[0] < lam[2] and concurrent(vec[0], vec[2])


def test_the_receive_rule_jumps_past_the_sender():
    history = [(0, "local", None)] * 5 + [(0, "send", "m"), (1, "recv", "m")]
    assert lamport_clocks(history, 2)[-1] == 7
    assert vector_clocks(history, 2)[-1] == (6, 1)


def test_wall_clocks_can_put_a_receive_before_its_send():
    p = LogicalParams(
        n_processes=2, n_events=6, send_prob=1.0, clock_offsets_s=(0.0, -20e-3)
    )
    ev = simulate_messages(p, seed=0)
    sends = ev[ev["kind"] == "send"]
    recvs = ev[ev["kind"] == "recv"]
    joined = sends.merge(recvs, on="msg", suffixes=("_s", "_r"))
    backwards = joined[joined["wall_s_r"] < joined["wall_s_s"]]
    assert len(backwards) > 0  # P1's clock is 20 ms behind: its receives look early
    assert (backwards["lamport_r"] > backwards["lamport_s"]).all()
    assert all(
        happened_before(a, b)
        for a, b in zip(backwards["vector_s"], backwards["vector_r"], strict=True)
    )
    assert (joined["true_s_r"] > joined["true_s_s"]).all()


def test_simulated_exchange_is_reproducible_and_labelled():
    p = LogicalParams()
    a, b = simulate_messages(p, seed=4), simulate_messages(p, seed=4)
    assert a.equals(b)
    assert a["true_s"].is_monotonic_increasing
    assert set(a["kind"]) <= {"local", "send", "recv"}
    assert a["event"].iloc[0].startswith("P")


@pytest.mark.parametrize(
    "history, match",
    [
        ([(0, "recv", 1)], "received before it is sent"),
        ([(0, "send", 1), (0, "send", 1)], "sent twice"),
        ([(0, "send", 1), (1, "recv", 1), (1, "recv", 1)], "received twice"),
        ([(3, "local", None)], "process"),
        ([(0, "jump", None)], "kind='jump'"),
    ],
)
def test_invalid_histories_are_refused(history, match):
    with pytest.raises(ValueError, match=match):
        lamport_clocks(history, 2)


def test_bad_parameters_name_the_argument():
    with pytest.raises(ValueError, match="n_processes=1"):
        LogicalParams(n_processes=1)
    with pytest.raises(ValueError, match="one offset per process"):
        LogicalParams(clock_offsets_s=(0.0,))
    with pytest.raises(ValueError, match="same length"):
        happened_before((1, 2), (1, 2, 3))


def test_the_exercise_check_accepts_the_solution_and_catches_wrong_answers(capsys):
    assert cl.clocks.check.vector_happened_before(
        cl.clocks.answer.vector_happened_before
    )
    assert "\u2714 vector_happened_before" in capsys.readouterr().out

    def stub(u, v):
        raise NotImplementedError

    assert cl.clocks.check.vector_happened_before(stub) is False
    assert "not attempted" in capsys.readouterr().out
    wrong = {
        "strictly smaller": lambda u, v: all(a < b for a, b in zip(u, v, strict=True)),
        "itself": lambda u, v: all(a <= b for a, b in zip(u, v, strict=True)),
        "Lamport clock": lambda u, v: sum(u) < sum(v),
    }
    for hint, fn in wrong.items():
        with pytest.raises(AssertionError, match=hint):
            cl.clocks.check.vector_happened_before(fn)
    with pytest.raises(ValueError, match="fn="):
        cl.clocks.check.vector_happened_before(None)
