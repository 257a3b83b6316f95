"""The register linearizability checker, on histories right and wrong."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterlab.control_plane.linearizable import (
    Op,
    check_linearizable,
    ops_from_records,
)


def W(p, v, a, b):
    return Op(p, "write", v, a, b)


def R(p, v, a, b):
    return Op(p, "read", v, a, b)


def test_a_sequential_history_is_linearizable():
    ok, text = check_linearizable(
        [W(0, 1, 0, 1), R(1, 1, 2, 3), W(0, 2, 4, 5), R(1, 2, 6, 7)]
    )
    assert ok, text


def test_a_stale_read_after_a_newer_write_completed_is_not():
    ops = [W(0, 1, 0, 1), W(0, 2, 2, 3), R(1, 1, 4, 5)]
    ok, text = check_linearizable(ops)
    assert not ok and "read returning 1" in text


def test_a_read_overlapping_a_write_may_return_either_value():
    for seen in (1, 2):
        assert check_linearizable([W(0, 1, 0, 1), W(0, 2, 2, 5), R(1, seen, 3, 4)])[0]


def test_two_reads_cannot_see_a_write_undone():
    # the second read starts after the first ended: it cannot go back to 1
    ops = [W(0, 1, 0, 1), W(0, 2, 2, 10), R(1, 2, 3, 4), R(2, 1, 5, 6)]
    assert not check_linearizable(ops)[0]


def test_a_value_never_written_is_not_linearizable():
    assert not check_linearizable([W(0, 1, 0, 1), R(1, 7, 2, 3)])[0]
    assert check_linearizable([R(1, None, 0, 1)])[0]  # the initial value


def test_a_write_of_unknown_outcome_may_show_later_or_never():
    lost = W(0, 9, 1, math.inf)
    assert check_linearizable([W(1, 1, 0, 0.5), lost, R(2, 9, 5, 6)])[0]
    assert check_linearizable([W(1, 1, 0, 0.5), lost, R(2, 1, 5, 6)])[0]
    # but not before it was sent
    assert not check_linearizable([W(1, 1, 0, 0.5), R(2, 9, 0.6, 0.8), lost])[0]


def test_records_keep_ok_ops_and_unknown_writes_only():
    recs = [
        dict(process=0, kind="write", value=1, invoke_s=0, complete_s=1, outcome="ok"),
        dict(
            process=0,
            kind="write",
            value=2,
            invoke_s=2,
            complete_s=3,
            outcome="unknown",
        ),
        dict(
            process=1,
            kind="read",
            value=None,
            invoke_s=2,
            complete_s=3,
            outcome="unknown",
        ),
        dict(
            process=1, kind="write", value=3, invoke_s=4, complete_s=5, outcome="failed"
        ),
    ]
    ops = ops_from_records(recs)
    assert [(o.value, o.complete_s) for o in ops] == [(1, 1.0), (2, math.inf)]


def test_bad_records_are_named():
    with pytest.raises(ValueError, match="kind"):
        ops_from_records([dict(kind="cas", outcome="ok")])
    with pytest.raises(ValueError, match="outcome"):
        ops_from_records([dict(kind="read", outcome="maybe")])
    with pytest.raises(ValueError, match="complete_s"):
        check_linearizable([W(0, 1, 2, 1)])


def _real_history(rng, clients=3, ops_each=40):
    """A history run on a real (atomic) register, with random overlaps."""
    value, out, t = None, [], 0.0
    pending = []
    for _ in range(clients * ops_each):
        t += rng.random()
        p = rng.randrange(clients)
        start = t - rng.random() * 0.8
        if rng.random() < 0.5:
            value = rng.randrange(10**9)
            op = W(p, value, start, t + rng.random() * 0.8)
        else:
            op = R(p, value, start, t + rng.random() * 0.8)
        pending.append(op)
    out.extend(pending)
    return out


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10**6))
def test_histories_of_an_atomic_register_pass_and_a_swapped_read_fails(seed):
    rng = random.Random(seed)
    ops = _real_history(rng)
    assert check_linearizable(ops)[0]
    # a read that returns a value written long after it completed is impossible
    writes = [o for o in ops if o.kind == "write"]
    reads = [o for o in ops if o.kind == "read"]
    late = max(writes, key=lambda o: o.invoke_s)
    early = [r for r in reads if r.complete_s < late.invoke_s]
    if early:
        bad = [o for o in ops if o is not early[0]]
        bad.append(
            R(early[0].process, late.value, early[0].invoke_s, early[0].complete_s)
        )
        assert not check_linearizable(bad)[0]
