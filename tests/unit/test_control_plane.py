"""The control plane's checks fail on wrong inputs; its model and charts."""

import json
import math

import pandas as pd
import pytest

import clusterlab as cl
from clusterlab.control_plane import check as C
from clusterlab.control_plane.answer import commit_index
from clusterlab.control_plane.chart import (
    election_chart,
    schedule_chart,
    write_latency_chart,
)
from clusterlab.control_plane.etcd import etcd_missing
from clusterlab.control_plane.sim import Job, SchedulerParams, simulate
from clusterlab.control_plane.store import agent_line
from clusterlab.models import consensus as M

A, B, D = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"


def _events(rows):
    return pd.DataFrame(rows, columns=["node", "state", "term", "t"])


def test_one_leader_per_term_passes_and_fails_when_two_lead_a_term():
    ok = _events([(A, "leader", 1, 0.0), (B, "leader", 2, 1.0), (A, "leader", 3, 2.0)])
    assert C.check_one_leader_per_term(ok) == 3
    two = _events([(A, "leader", 1, 0.0), (B, "leader", 1, 1.0)])
    with pytest.raises(AssertionError, match="two leaders in term 1"):
        C.check_one_leader_per_term(two)


def _writes(final):
    w = pd.DataFrame({"key": ["x", "y"], "value": [1, 2], "committed": [True, True]})
    w.attrs["final"] = final
    return w


def test_no_lost_commits_fails_when_a_replica_lost_a_write():
    good = {A: {"x": 1, "y": 2}, B: {"x": 1, "y": 2}}
    assert C.check_no_lost_commits(_writes(good)) == 2
    with pytest.raises(AssertionError, match="lost"):
        C.check_no_lost_commits(_writes({A: {"x": 1, "y": 2}, B: {"x": 1}}))
    with pytest.raises(AssertionError, match="lost"):
        C.check_no_lost_commits(_writes({A: {"x": 1, "y": 3}}))


def _cut(minority_committed=False, applied=False):
    writes = pd.DataFrame(
        {"key": ["minority", "majority"], "value": [2, 3],
         "committed": [minority_committed, True]}
    )  # fmt: skip
    data = {"majority": 3, **({"minority": 2} if applied else {})}
    return {
        "writes": writes,
        "majority": [B, D],
        "majority_leader": B,
        "final": {A: dict(data), B: dict(data), D: dict(data)},
    }


def test_minority_check_fails_when_the_minority_commits():
    C.check_minority_cannot_commit(_cut())
    with pytest.raises(AssertionError, match="minority committed"):
        C.check_minority_cannot_commit(_cut(minority_committed=True))
    with pytest.raises(AssertionError, match="applied the minority"):
        C.check_minority_cannot_commit(_cut(applied=True))


def _rounds(times, vote_rounds=None, max_timeout_s=0.8):
    return pd.DataFrame(
        {"round": range(len(times)), "election_s": times, "min_timeout_s": 0.4,
         "max_timeout_s": max_timeout_s, "heartbeat_s": 0.05,
         "vote_rounds": vote_rounds or [1] * len(times)}
    )  # fmt: skip


def test_election_check_fails_when_faster_than_the_timeout_or_far_slower():
    assert len(C.check_election_times(_rounds([0.5, 0.8, 1.3], [1, 1, 2]))) == 3
    with pytest.raises(AssertionError, match="less than min timeout"):
        C.check_election_times(_rounds([0.5, 0.05]))
    with pytest.raises(AssertionError, match="more than 1 round"):
        C.check_election_times(_rounds([0.5, 1.3]))  # one round cannot take 1.3 s
    with pytest.raises(AssertionError, match="more than 2 round"):
        C.check_election_times(_rounds([0.5, 1.8], [1, 2]))


def test_the_election_window_is_tighter_than_two_rounds_plus_half_a_second():
    lo, hi = M.election_window_s(0.4, 0.8, 0.05, 1, 0.01, C.ELECTION_NOISE_S)
    assert (lo, hi) == pytest.approx((0.35, 0.86))
    assert hi < 2 * 0.8 + 0.5


def test_a_wrong_timeout_model_fails_the_judge(monkeypatch):
    """Elections of a 0.4-0.8 s cluster, judged with a claimed max of 0.5 s."""
    monkeypatch.setattr(C.os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # quiet
    measured = [0.45, 0.76, 0.62]
    assert C.election_judge(_rounds(measured))[0] == "pass"
    verdict, text = C.election_judge(_rounds(measured, max_timeout_s=0.5))
    assert verdict == "miss" and "0.760" in text
    monkeypatch.setattr(C.os, "getloadavg", lambda: (99.0, 99.0, 99.0))
    assert C.election_judge(_rounds(measured, max_timeout_s=0.5))[0] == "busy"
    assert C.election_judge(_rounds([0.2]))[0] == "wrong"  # load cannot speed up


def test_the_election_window_refuses_bad_input():
    with pytest.raises(ValueError, match="vote_rounds"):
        M.election_window_s(0.4, 0.8, 0.05, 0)
    with pytest.raises(ValueError, match="noise_s"):
        M.election_window_s(0.4, 0.8, 0.05, 1, 0.0, -1.0)


def _latency(batch, ms):
    return pd.DataFrame(
        {"batch": batch, "heartbeat_s": 0.05, "i": range(len(ms)),
         "committed": True, "latency_s": [m / 1e3 for m in ms]}
    )  # fmt: skip


def test_write_latency_check_fails_when_batching_is_free():
    fast, slow = _latency(False, [2, 3, 2]), _latency(True, [50, 55, 52])
    assert C.check_write_latency(fast, slow)["batched_s"] == pytest.approx(0.052)
    with pytest.raises(AssertionError, match="not slower"):
        C.check_write_latency(slow, fast)
    with pytest.raises(AssertionError, match="half a heartbeat"):
        C.check_write_latency(fast, _latency(True, [4, 5, 4]))


def _store_table(backend="c10d", host_survivor_went_on=False):
    rows = [
        ("store host killed", 0, True, False, -9, ""),
        ("store host killed", 1, False, host_survivor_went_on,
         0 if host_survivor_went_on else 1,
         "RuntimeError Connection closed by peer | RendezvousConnectionError store"),
        ("other node killed", 0, False, True, 0, "RuntimeError Connection closed"),
        ("other node killed", 1, True, False, -9, ""),
    ]  # fmt: skip
    t = pd.DataFrame(
        rows, columns=["job", "node", "killed", "went_on_alone", "exit_code", "errors"]
    )
    return t.assign(backend=backend, steps_together=3)


def test_store_check_fails_when_the_survivor_goes_on_without_the_store():
    C.check_store_is_single_point(_store_table())
    with pytest.raises(AssertionError, match="without the store's host"):
        C.check_store_is_single_point(_store_table(host_survivor_went_on=True))
    C.check_store_is_single_point(_store_table("etcd", host_survivor_went_on=True))
    with pytest.raises(AssertionError, match="with etcd"):
        C.check_store_is_single_point(_store_table("etcd"))
    first = _store_table()
    first = first[first["job"] == "store host killed"]
    C.check_store_is_single_point(first)  # the first job alone (SMOKE size)
    with pytest.raises(AssertionError, match="no job in which"):
        C.check_store_is_single_point(_store_table().iloc[2:])
    bad = _store_table()
    bad.loc[bad["job"] == "other node killed", "went_on_alone"] = False
    with pytest.raises(AssertionError, match="did not go on alone"):
        C.check_store_is_single_point(bad)


TWO_SIX = [Job("a", 0.0, 6, 10.0), Job("b", 0.0, 6, 10.0)]


def test_gang_check_fails_when_greedy_did_not_deadlock():
    greedy = simulate(TWO_SIX, SchedulerParams(1, 8, "greedy"), horizon_s=30.0)
    gang = simulate(TWO_SIX, SchedulerParams(1, 8, "gang"))
    C.check_gang_against_greedy(greedy, gang)
    with pytest.raises(AssertionError, match="did not deadlock"):
        C.check_gang_against_greedy(gang, gang)


def test_backfill_check_fails_when_it_delays_the_head_or_fills_nothing():
    jobs = [Job("j0", 0.0, 4, 10.0), Job("j1", 0.0, 8, 10.0), Job("j2", 1.0, 4, 5.0)]
    gang = simulate(jobs, SchedulerParams(1, 8, "gang"))
    fill = simulate(jobs, SchedulerParams(1, 8, "backfill"))
    C.check_backfill(gang, fill)
    with pytest.raises(AssertionError, match="no job earlier"):
        C.check_backfill(gang, gang)
    late = fill.copy()
    late.loc[late["job"] == "j1", "start_s"] = 15.0
    with pytest.raises(AssertionError, match="delayed the first waiting job"):
        C.check_backfill(gang, late)


def test_topology_check_fails_when_placement_ignores_switches():
    jobs = [Job("j0", 0.0, 2, 100.0), Job("j1", 1.0, 4, 10.0)]
    anyp = simulate(jobs, SchedulerParams(2, 4, "gang", "any"))
    topo = simulate(jobs, SchedulerParams(2, 4, "gang", "topology"))
    C.check_topology_placement(anyp, topo)
    with pytest.raises(AssertionError, match="did not save"):
        C.check_topology_placement(anyp, anyp)


def test_commit_index_exercise_check(capsys):
    assert C.commit_index(commit_index) is True
    assert "\u2714" in capsys.readouterr().out

    def stub(match):
        raise NotImplementedError

    assert C.commit_index(stub) is False
    with pytest.raises(AssertionError, match="majority"):
        C.commit_index(lambda m: max(m))  # the fastest replica is not a majority
    with pytest.raises(AssertionError):
        C.commit_index(lambda m: sorted(m)[len(m) // 2])  # sorted the wrong way
    with pytest.raises(ValueError, match="fn"):
        C.commit_index(3)
    assert cl.control_plane.check.commit_index is not None


def test_consensus_model():
    assert [M.quorum_size(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]
    assert [M.tolerated_failures(n) for n in (1, 3, 4, 5, 7)] == [0, 1, 1, 2, 3]
    # 5 replicas: the leader and 2 followers; the 2nd fastest of 4 round trips
    assert M.commit_latency_s([0.09, 0.001, 0.002, 0.5]) == pytest.approx(0.002)
    assert M.commit_latency_s([0.01, 0.02], disk_s=0.001) == pytest.approx(0.011)
    assert M.expected_first_timeout_s(2, 0.4, 0.8) == pytest.approx(0.4 + 0.4 / 3)
    assert M.election_time_bounds_s(0.4, 0.8, 0.05) == (pytest.approx(0.35), 1.6)
    with pytest.raises(ValueError, match="follower_rtts_s"):
        M.commit_latency_s([0.1])
    with pytest.raises(ValueError, match="heartbeat_s"):
        M.election_time_bounds_s(0.4, 0.8, 0.5)
    with pytest.raises(ValueError, match="n_replicas"):
        M.quorum_size(0)


def test_agent_line_and_its_bad_arguments():
    cmd = agent_line(0, "127.0.0.1:5", "job1")
    assert "--nnodes=1:2" in cmd and "--max-restarts=1" in cmd
    assert any("is_host=1" in c for c in cmd)
    assert not any("is_host" in c for c in agent_line(1, "h:1", "j", backend="etcd"))
    with pytest.raises(ValueError, match="backend"):
        agent_line(0, "h:1", "j", backend="zookeeper")
    with pytest.raises(ValueError, match="node"):
        agent_line(2, "h:1", "j")


def test_etcd_missing_says_why_or_nothing(monkeypatch):
    import shutil

    assert isinstance(etcd_missing(), str)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert "no `etcd` on PATH" in etcd_missing()


def test_charts_are_small_and_check_their_columns():
    t = pd.concat(
        simulate(TWO_SIX, SchedulerParams(1, 8, p), horizon_s=30.0)
        for p in ("greedy", "gang")
    )
    charts = [
        schedule_chart(t),
        election_chart(_rounds([0.5, 0.7])),
        write_latency_chart(pd.concat([_latency(False, [2, 3]), _latency(True, [50])])),
    ]
    for chart in charts:
        assert len(json.dumps(chart.to_dict())) < 50_000
    with pytest.raises(ValueError, match="lacks"):
        schedule_chart(t.drop(columns=["switches"]))
    assert math.isfinite(t["held_idle_gpu_s"].sum())
