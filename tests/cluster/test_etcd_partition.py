"""etcd on three emulated nodes: the leader's node partitioned away, then healed."""

from __future__ import annotations

import pytest

from clusterlab.cluster import names
from clusterlab.cluster.support import why_not
from clusterlab.control_plane.etcd import etcd_missing

REASON = why_not() or etcd_missing() or None
pytestmark = [
    pytest.mark.dist,
    pytest.mark.skipif(REASON is not None, reason=f"no emulated etcd: {REASON}"),
]


def test_the_majority_writes_the_minority_refuses_and_the_heal_converges():
    from clusterlab.cluster.emulated import EmulatedCluster
    from clusterlab.cluster.topology import Topology
    from clusterlab.control_plane import check, register

    with EmulatedCluster(Topology(nodes=3, rate_mbit=100)) as cluster:
        with register.EtcdOnNodes(cluster) as etcd:
            result = register.partitioned_leader_history(cluster, etcd)
        cid = cluster.id
    out = check.register_verdict(result)
    assert out["majority_writes"] > 0 and out["minority_answers"] == 0
    assert [n for n in names.book_namespaces() if names.id_of(n) == cid] == []


def test_two_nodes_are_refused():
    from clusterlab.control_plane.register import EtcdOnNodes

    class Two:
        class topology:
            nodes = 2

    with pytest.raises(ValueError, match="nodes=2"):
        EtcdOnNodes(Two())
