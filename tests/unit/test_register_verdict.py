"""The verdict on a register's history under a cut-off leader, fed wrong histories."""

from __future__ import annotations

import copy

import pytest

from clusterlab.control_plane.check import register_verdict


def _rec(p, kind, value, a, b, outcome="ok", final=False):
    r = dict(
        process=p, kind=kind, value=value, invoke_s=a, complete_s=b, outcome=outcome
    )
    return r | ({"final": True} if final else {})


def _history():
    """Leader 0 cut at t=10, healed at t=20; 1 and 2 write on through a new leader."""
    recs = [_rec(0, "write", "0-0", 1, 1.1), _rec(1, "read", "0-0", 2, 2.1)]
    recs += [
        _rec(0, "write", "0-1", 11, 11.5, "unknown"),
        _rec(0, "read", None, 12, 12.5, "failed"),
    ]
    t = 13.0
    for k in range(5):
        recs.append(_rec(1 + k % 2, "write", f"{1 + k % 2}-{k}", t, t + 0.1))
        recs.append(_rec(2 - k % 2, "read", f"{1 + k % 2}-{k}", t + 0.2, t + 0.3))
        t += 1
    recs += [_rec(p, "read", "1-4", 30 + p, 30.1 + p, final=True) for p in range(3)]
    return dict(records=recs, leader=0, cut_s=10.0, healed_s=20.0)


def test_the_history_of_a_working_cluster_passes():
    out = register_verdict(_history())
    assert out["ok"] and out["majority_writes"] == 5 and "'1-4'" in out["text"]


def test_a_stale_read_fails_linearizability():
    h = _history()
    h["records"].append(_rec(1, "read", "0-0", 25, 25.1))
    with pytest.raises(AssertionError, match="not linearizable"):
        register_verdict(h)


def test_a_minority_that_answers_during_the_cut_fails():
    h = _history()
    h["records"].append(_rec(0, "read", "1-0", 13.5, 13.6))  # a current value
    with pytest.raises(AssertionError, match="cut-off member answered"):
        register_verdict(h)


def test_a_majority_that_never_writes_fails():
    h = _history()
    quiet = [
        r for r in h["records"] if not 10 < r["invoke_s"] < 20 or r["process"] == 0
    ]
    h["records"] = [r | {"value": "0-0"} if r.get("final") else r for r in quiet]
    with pytest.raises(AssertionError, match="majority side wrote nothing"):
        register_verdict(h)


def test_members_that_disagree_after_the_heal_fail():
    h = copy.deepcopy(_history())
    h["records"] = [r for r in h["records"] if not r.get("final")]
    h["records"] += [
        _rec(p, "read", v, 30 + p, 30.1 + p, final=True)
        for p, v in ((0, "1-4"), (1, "1-4"))
    ]
    with pytest.raises(AssertionError, match="final reads"):
        register_verdict(h)


def test_a_stale_final_read_is_reported_and_a_stale_last_one_fails():
    h = copy.deepcopy(_history())
    h["records"].insert(-3, _rec(0, "read", "0-1", 29, 29.1, final=True))
    out = register_verdict(h)
    assert out["stale_after_heal"] == 1 and "member 0 answered '0-1'" in out["text"]
    h["records"].append(_rec(0, "read", "0-1", 40, 40.1, final=True))
    with pytest.raises(AssertionError, match="last final reads"):
        register_verdict(h)


def test_the_same_stale_read_by_a_member_of_the_majority_fails():
    h = copy.deepcopy(_history())
    h["records"].insert(-3, _rec(1, "read", "0-1", 29, 29.1, final=True))
    with pytest.raises(AssertionError, match="not linearizable"):
        register_verdict(h)


def test_an_answer_counts_as_during_the_cut_until_the_heal_begins():
    h = _history() | {"heal_from_s": 19.9}
    h["records"].append(_rec(0, "read", "1-4", 19.0, 19.95))  # the heal under way
    assert register_verdict(h)["ok"]
    h["records"].append(_rec(0, "read", "1-4", 19.0, 19.85))  # before it began
    with pytest.raises(AssertionError, match="cut-off member answered"):
        register_verdict(h)


def test_the_history_chart_stays_under_the_books_chart_budget():
    import json

    from clusterlab.control_plane.chart import register_chart
    from clusterlab.core.theme import lean_spec

    recs = [
        _rec(
            k % 3,
            "write" if k % 2 else "read",
            f"{k % 3}-{k}",
            k * 0.0123,
            k * 0.0123 + 0.004,
        )
        for k in range(900)
    ]
    h = dict(records=recs, leader=1, start_s=0.0, cut_s=2.0, healed_s=5.0)
    size = len(json.dumps(lean_spec(register_chart(h).to_dict())))
    assert size < 50_000, size
