"""torch's etcd rendezvous against a three-member etcd cluster that loses its
leader between two agents' joins, and against one member that dies.

Skipped where ``etcd`` or ``python-etcd`` is missing. The check that decides the
lab's claim (replication keeps the rendezvous alive) is fed the one-member run,
which must fail it.
"""

import pytest

from clusterlab.control_plane.check import check_rendezvous_survives
from clusterlab.control_plane.etcd import etcd_missing
from clusterlab.control_plane.etcd_cluster import EtcdCluster, meet_losing_a_member

pytestmark = [
    pytest.mark.dist,
    pytest.mark.skipif(bool(etcd_missing()), reason=etcd_missing() or "-"),
]


def test_three_members_survive_the_leaders_death_during_rendezvous():
    with EtcdCluster(3) as cluster:
        table, state, kill = meet_losing_a_member(cluster)
        assert kill["was_leader"] and not kill["was_endpoint"]
        assert len(cluster.alive()) == 2 and kill["member"] not in cluster.alive()
        new_leader_s = check_rendezvous_survives(table, state, kill)
    assert 0 < new_leader_s < 10
    assert sorted(table["rank"]) == [0, 1]
    # the second agent started only once its member took writes again
    assert new_leader_s <= kill["writable_s"] < 30


def test_a_member_is_writable_while_a_majority_lives_and_not_after():
    with EtcdCluster(3) as cluster:
        assert 0 <= cluster.wait_until_writable(0, timeout_s=10) < 10
        cluster.kill(1)
        cluster.kill(2)  # one of three: no majority, no write commits
        with pytest.raises(RuntimeError, match="member 0 took no write within 3"):
            cluster.wait_until_writable(0, timeout_s=3)
        with pytest.raises(ValueError, match="member"):
            cluster.wait_until_writable(5, timeout_s=1)


def test_one_member_is_a_single_point_and_the_check_says_so():
    with EtcdCluster(1) as cluster:
        table, state, kill = meet_losing_a_member(
            cluster, victim="endpoint", timeout_s=5
        )
    assert (table["error"] != "").all()
    with pytest.raises(AssertionError, match="an agent failed"):
        check_rendezvous_survives(table, state, kill)


def test_the_check_fails_when_no_new_leader_was_elected():
    import pandas as pd

    table = pd.DataFrame({"error": ["", ""]})
    state = {"status": "final", "participants": [0, 1]}
    with pytest.raises(AssertionError, match="no new leader"):
        check_rendezvous_survives(table, state, {"member": 0, "new_leader": None})
    with pytest.raises(AssertionError, match="did not complete"):
        check_rendezvous_survives(table, {"status": "joinable"}, {"member": 0})


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="n_members"):
        EtcdCluster(0)
    with pytest.raises(ValueError, match="n_members=1"):
        with EtcdCluster(1) as one:
            meet_losing_a_member(one)
