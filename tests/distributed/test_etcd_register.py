"""A register on three real etcd members on loopback, its leader paused and resumed."""

import pytest

from clusterlab.control_plane import check, register
from clusterlab.control_plane.etcd import etcd_missing
from clusterlab.control_plane.etcd_cluster import EtcdCluster

MISSING = etcd_missing() or None
pytestmark = [
    pytest.mark.dist,
    pytest.mark.skipif(MISSING is not None, reason=f"no etcd: {MISSING}"),
]


def test_a_paused_leader_leaves_a_linearizable_history_and_nothing_running():
    with EtcdCluster(3) as etcd:
        result = register.paused_leader_history(
            etcd, before_s=1.0, cut_s=2.5, after_s=1.0
        )
        procs = list(etcd.procs)
    out = check.register_verdict(result)
    assert out["majority_writes"] > 0 and len(out["finals"]) == 3
    assert all(p.poll() is not None for p in procs)


def test_bad_windows_are_named():
    with pytest.raises(ValueError, match="cut_s"):
        register.paused_leader_history(None, cut_s=0)
