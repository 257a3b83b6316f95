"""torch's etcd rendezvous meets through a real etcd server on loopback.

Runs where ``etcd`` (Debian's etcd-server) and ``python-etcd`` are installed,
and is skipped with the reason otherwise. Nothing is left listening afterwards.
"""

import psutil
import pytest

from clusterlab.control_plane.etcd import EtcdServer, etcd_missing, meet_through_etcd

pytestmark = [
    pytest.mark.dist,
    pytest.mark.skipif(bool(etcd_missing()), reason=etcd_missing() or "-"),
]


def _listening(ports) -> list:
    return [
        c
        for c in psutil.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port in ports
    ]


def test_two_agents_meet_through_etcd_and_nothing_is_left(no_leftover_processes):
    with EtcdServer() as etcd:
        ports = {etcd.client_port, etcd.peer_port}
        assert etcd.version().startswith("3.")
        table, state = meet_through_etcd(etcd, n_nodes=2)
        assert (table["error"] == "").all(), table["error"].tolist()
        assert sorted(table["rank"]) == [0, 1] and (table["world_size"] == 2).all()
        assert state["status"] == "final" and sorted(state["participants"]) == [0, 1]
        assert _listening(ports)
    assert not _listening(ports)


def test_a_server_that_cannot_start_is_reported_and_cleaned_up():
    with pytest.raises(ValueError, match="start_timeout_s"):
        EtcdServer(start_timeout_s=0)
