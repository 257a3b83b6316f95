"""The emulated cluster as root: shaped links measured, faults, and no residue.

These tests need root, iproute2, nftables and pyroute2; elsewhere they are
skipped with the reason ``cl.cluster.support.why_not`` gives.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from clusterlab.cluster import names
from clusterlab.cluster.support import why_not

REASON = why_not()
pytestmark = [
    pytest.mark.dist,
    pytest.mark.skipif(REASON is not None, reason=f"no emulated cluster: {REASON}"),
]


def _cli(*args, timeout=120):
    cmd = [sys.executable, "-m", "clusterlab.cluster", "allreduce", *args, "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _ours_left(before: set[str]) -> list[str]:
    """New namespaces of the book whose owner has gone (a lab's live cluster that
    runs beside this test in another worker is not counted)."""
    new = set(names.book_namespaces()) - before
    return sorted(n for n in new if not names.owner_alive(names.id_of(n)))


def _owner_pid(cluster_id: str) -> int | None:
    """The pid that claimed ``cluster_id`` (another test's cluster is not ours)."""
    try:
        return int((names.OWNERS / cluster_id).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


@pytest.mark.timing  # times the links: run alone, with nothing beside it
def test_two_nodes_reach_most_of_a_200_mbit_link_and_leave_nothing():
    before = set(names.book_namespaces())
    rec = _cli("--nodes", "2", "--ranks-per-node", "1", "--rate-mbit", "200",
               "--size-mib", "64")  # fmt: skip
    ratio = rec["busbw_GBps"] / (200e6 / 8 / 1e9)
    assert 0.6 <= ratio <= 1.05, rec
    assert rec["node_addresses"] == ["10.213.0.1", "10.213.0.2"]
    keys = "nodes ranks_per_node rate_mbit size_mib algorithm seconds busbw_GBps"
    assert set(rec) >= {*keys.split(), "node_addresses"}
    assert _ours_left(before) == []


@pytest.mark.timing  # times the links: run alone, with nothing beside it
def test_hierarchical_beats_the_flat_ring_across_two_nodes_of_two():
    args = ("--nodes", "2", "--ranks-per-node", "2", "--rate-mbit", "100",
            "--size-mib", "16", "--reps", "2")  # fmt: skip
    ring = _cli(*args, "--algorithm", "ring")
    hier = _cli(*args, "--algorithm", "hierarchical")
    ratio = ring["seconds"] / hier["seconds"]
    assert ratio >= 1.2, (ratio, ring, hier)


def _allreduce_once(rank, world_size):
    import torch
    import torch.distributed as dist

    x = torch.ones(1024)
    dist.all_reduce(x)
    return float(x[0])


def test_a_partition_fails_a_collective_within_its_timeout_and_heals():
    from clusterlab.cluster.emulated import EmulatedCluster
    from clusterlab.cluster.launch import launch
    from clusterlab.cluster.topology import Topology
    from clusterlab.core.supervisor import LaunchError

    with EmulatedCluster(Topology(nodes=2, rate_mbit=200)) as c:
        assert launch(_allreduce_once, cluster=c, timeout=20) == [2.0, 2.0]
        c.partition([0], [1])
        t0 = time.monotonic()
        with pytest.raises(LaunchError) as err:
            launch(_allreduce_once, cluster=c, timeout=4)
        assert time.monotonic() - t0 < 4 * 3 + 10, "the failure took too long"
        assert "rank" in str(err.value)
        c.heal()
        assert launch(_allreduce_once, cluster=c, timeout=20) == [2.0, 2.0]


def test_loss_and_link_faults_are_made_and_removed_inside_the_nodes():
    from clusterlab.cluster import build, faults
    from clusterlab.cluster.emulated import EmulatedCluster
    from clusterlab.cluster.topology import Topology

    with EmulatedCluster(Topology(nodes=2, rate_mbit=100)) as c:
        c.loss([1], 5.0)
        assert faults.tables(c.netns(1)) == ["inet clusterlab"]
        c.partition([0], [1], both_ways=False)
        assert faults.tables(c.netns(0)) == ["inet clusterlab"]
        c.heal()
        assert faults.tables(c.netns(0)) == faults.tables(c.netns(1)) == []
        c.link_down(1)
        assert build.link_state(c.spaces, "n1") == "down"
        c.link_up(1)
        assert build.link_state(c.spaces, "n1") == "up"
    assert c.residue() == {"namespaces": [], "processes": [], "owner_record": False}


DRIVER = """
import sys, time
from clusterlab.cluster.emulated import EmulatedCluster
from clusterlab.cluster.topology import Topology
c = EmulatedCluster(Topology(nodes=2, rate_mbit=100)).__enter__()
p = c.popen(1, [sys.executable, "-c", "import time; time.sleep(300)"])
print(c.id, p.pid, flush=True)
time.sleep(300)
"""


def test_a_sigkilled_driver_leaves_only_what_the_next_start_removes():
    drv = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE,
                           text=True)  # fmt: skip
    try:
        cid, rank_pid = drv.stdout.readline().split()
        assert [n for n in names.book_namespaces() if names.id_of(n) == cid]
        os.kill(drv.pid, signal.SIGKILL)
        drv.wait(timeout=10)
        assert cid in names.leftovers()
        assert cid in names.remove_leftovers()
        assert not [n for n in names.book_namespaces() if names.id_of(n) == cid]
        assert names.book_processes([cid]) == []
        assert not os.path.exists(f"/proc/{rank_pid}") or _zombie(int(rank_pid))
        assert not (names.OWNERS / cid).exists()
    finally:
        if drv.poll() is None:
            drv.kill()


def _zombie(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_leftover_removal_spares_other_namespaces_and_live_clusters():
    from pyroute2 import netns

    other = f"notclusterlab-{os.getpid()}"
    netns.create(other)
    live = names.new_id()
    names.claim(live)  # this process is alive: its cluster is not a leftover
    try:
        assert live not in names.remove_leftovers()
        assert other in os.listdir(names.NETNS_DIR)
        with pytest.raises(ValueError, match="not one of the book's"):
            names.remove_namespace(other)
    finally:
        names.release(live)
        netns.remove(other)


def _listeners(path: str) -> set[tuple[str, int]]:
    out = set()
    for line in open(path).read().splitlines()[1:]:
        f = line.split()
        if f[3] == "0A":  # LISTEN
            addr, port = f[1].split(":")
            out.add((addr, int(port, 16)))
    return out


def _off_loopback(entries):
    loop = {"0100007F", "00000000000000000000000001000000"}
    return {e for e in entries if e[0] not in loop}


def test_no_listener_of_the_cluster_appears_on_the_host():
    from clusterlab.cluster.emulated import EmulatedCluster
    from clusterlab.cluster.topology import Topology

    port = 29000 + os.getpid() % 1000
    server = ("import socket, time; s = socket.socket(); "
              f"s.bind(('0.0.0.0', {port})); s.listen(); time.sleep(60)")  # fmt: skip
    before = _off_loopback(_listeners("/proc/self/net/tcp"))
    with EmulatedCluster(Topology(nodes=2, rate_mbit=100)) as c:
        p = c.popen(0, [sys.executable, "-c", server])
        deadline = time.monotonic() + 20
        inside = set()
        while time.monotonic() < deadline and (("00000000", port) not in inside):
            inside = _listeners(f"/proc/{p.pid}/net/tcp")
            time.sleep(0.1)
        assert ("00000000", port) in inside, "the node's server never listened"
        host = _off_loopback(_listeners("/proc/self/net/tcp"))
        assert [e for e in host - before if e[1] == port] == []
    p.wait(timeout=10)


@pytest.mark.timing  # times the links: run alone, with nothing beside it
def test_an_oversubscribed_spine_sets_the_rate_of_a_ring_across_leaves():
    from clusterlab.cluster.allreduce import bus_bandwidth_Bps, timed_allreduce
    from clusterlab.cluster.emulated import EmulatedCluster
    from clusterlab.cluster.launch import launch
    from clusterlab.cluster.topology import Topology

    topo = Topology(nodes=4, rate_mbit=200, kind="two_tier", leaves=2, uplink_mbit=50)
    assert topo.oversubscription == 8.0
    size = 8 * 2**20
    with EmulatedCluster(topo) as c:
        times = launch(timed_allreduce, cluster=c, timeout=60, size_bytes=size,
                       per_node=1, algorithm="ring", reps=1)  # fmt: skip
    busbw = bus_bandwidth_Bps(size, max(t[0] for t in times), 4)
    assert 0.6 <= busbw / (50e6 / 8) <= 1.05, busbw
    assert busbw / (200e6 / 8) < 0.3, "the nodes' own links set the rate, not the spine"


def test_a_sigkilled_command_mid_all_reduce_leaves_nothing_after_the_next_start():
    before = set(names.book_namespaces())
    job = "--nodes 2 --ranks-per-node 2 --rate-mbit 20 --size-mib 64".split()
    cmd = [sys.executable, "-m", "clusterlab.cluster", "allreduce", *job]
    err = tempfile.TemporaryFile()
    drv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 60  # slow to start on a busy machine
        ids: set[str] = set()
        while time.monotonic() < deadline and drv.poll() is None:
            ids = {names.id_of(n) for n in set(names.book_namespaces()) - before}
            ids = {i for i in ids if _owner_pid(i) == drv.pid}  # its own cluster
            if ids and len(names.book_processes(ids)) >= 4:  # agents and ranks run
                break
            time.sleep(0.2)
        if not (ids and len(names.book_processes(ids)) >= 4):
            err.seek(0)
            said = err.read().decode(errors="replace")[-3000:]
            raise AssertionError(
                f"the job never started (driver exit {drv.poll()}, clusters {ids}, "
                f"{len(names.book_processes(ids)) if ids else 0} processes): {said}"
            )
        os.kill(drv.pid, signal.SIGKILL)
        drv.wait(timeout=10)
        assert ids <= set(names.remove_leftovers())
        assert names.book_processes(ids) == []
        assert not [n for n in names.book_namespaces() if names.id_of(n) in ids]
    finally:
        if drv.poll() is None:
            drv.kill()
