"""Raft's guarantees on real pysyncobj replicas on loopback, and no leftovers.

Three leader kills on three replicas (each killed replica restarts from its
journal), a minority cut off from a five-replica majority, and write latency.
"""

import psutil
import pytest

from clusterlab.control_plane import check as C
from clusterlab.control_plane import raft_experiments as rx
from clusterlab.control_plane.raft import RaftCluster, pysyncobj_available
from clusterlab.core.busy import retry

pytestmark = [
    pytest.mark.dist,
    pytest.mark.skipif(not pysyncobj_available(), reason="pysyncobj not installed"),
]


def _listening(ports) -> list:
    return [
        c
        for c in psutil.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port in ports
    ]


def test_invariants_over_three_leader_kills(no_leftover_processes):
    outcome = retry(
        lambda: rx.leader_kills(n_replicas=3, kills=3),
        lambda run: C.election_judge(run[0]),
        what="each election inside its Raft window",
        hint="the timeouts, heartbeat or tick the replicas ran with",
    )
    rounds, writes, events = outcome.result
    assert len(rounds) == 3 and (rounds["killed"] != rounds["new_leader"]).all()
    assert C.check_one_leader_per_term(events) >= 4
    assert C.check_no_lost_commits(writes) == 12
    assert (rounds["vote_rounds"] >= 1).all()
    assert rounds["term"].is_monotonic_increasing


def test_a_minority_cannot_commit(no_leftover_processes):
    cut = rx.minority_cut(n_replicas=3, write_timeout_s=1.0)
    C.check_minority_cannot_commit(cut)
    C.check_one_leader_per_term(cut["events"])


def test_a_write_waits_for_the_majority_and_no_listener_is_left(
    no_leftover_processes,
):
    fast = rx.write_latency(3, 8, batch=False)
    slow = rx.write_latency(3, 8, batch=True, heartbeat_s=0.05)
    C.check_write_latency(fast, slow)
    with RaftCluster(3) as rc:
        ports = {int(a.rpartition(":")[2]) for a in rc.addresses}
        rc.wait_for_leader()
        assert len(_listening(ports)) == 3
    assert not _listening(ports)


def test_bad_arguments_raise_naming_them():
    with pytest.raises(ValueError, match="n_replicas"):
        RaftCluster(2)
    with pytest.raises(ValueError, match="max_timeout_s"):
        RaftCluster(3, min_timeout_s=0.5, max_timeout_s=0.4)
    with pytest.raises(ValueError, match="kills"):
        rx.leader_kills(3, kills=0)
