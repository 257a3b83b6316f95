"""A register on etcd under a fault: the history its clients saw, to be checked.

Three etcd members, one client beside each, writing and reading one key (the
``register_client`` module); after a while the Raft leader is cut off, then
healed, and every client reads the key once more when the writing has stopped.
Two ways to cut it off:

* ``paused_leader_history(etcd)``: on loopback (no root), the leader's process
  is stopped with SIGSTOP and continued with SIGCONT. To the others it looks
  like a partition: no heartbeats, no answers, then it is back.
* ``partitioned_leader_history(cluster, etcd)``: on the emulated cluster (root),
  one member per node (``EtcdOnNodes``); the leader's node is partitioned from
  the other two with packet filters, and healed.

Either returns the records and the times of the cut and the heal, which
``cl.control_plane.check.register_verdict`` judges: the history linearizable,
the majority side writing during the cut, the minority side refusing, and
every member answering the same value after the heal.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clusterlab.control_plane.etcd import etcd_missing
from clusterlab.control_plane.etcd_cluster import member_argv
from clusterlab.core.torchrun import kill_session
from clusterlab.core.validate import check_float

CLIENT = "clusterlab.control_plane.register_client"
#: Seconds the clients' Python takes to start, before their first operation.
CLIENT_START_S = 2.0


def _client_argv(*args) -> list[str]:
    return [sys.executable, "-m", CLIENT, *map(str, args)]


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))


def _sleep_until(t: float) -> None:
    while (left := t - time.monotonic()) > 0:
        time.sleep(min(left, 0.05))


def run_history(n, endpoint, popen, cut, heal, leader, before_s, cut_s, after_s):
    """Run the clients, cut and heal at their times; return the result dict.

    ``popen(i, argv, **kw)`` starts client ``i`` where member ``i`` is reached
    at ``endpoint(i)``; ``cut()`` and ``heal()`` apply the fault.
    """
    seconds = before_s + cut_s + after_s
    start = time.monotonic() + CLIENT_START_S
    with tempfile.TemporaryDirectory(prefix="register-") as tmp:
        outs = [Path(tmp) / f"client{i}.jsonl" for i in range(n)]
        procs = []
        try:
            for i in range(n):
                argv = _client_argv(
                    "--endpoint", endpoint(i), "--process", i, "--start-at", start,
                    "--seconds", seconds, "--final-read", "--out", outs[i],
                )  # fmt: skip
                procs.append(
                    popen(
                        i,
                        argv,
                        env=_env(),
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE,
                    )
                )
            _sleep_until(start + before_s)
            cut()
            cut_at = time.monotonic()
            _sleep_until(cut_at + cut_s)
            heal_from = time.monotonic()  # packets may pass before heal() returns
            heal()
            healed_at = time.monotonic()
            deadline = start + seconds + 30.0
            for i, proc in enumerate(procs):
                left = max(1.0, deadline - time.monotonic())
                err = proc.communicate(timeout=left)[1]
                if proc.returncode != 0:
                    raise RuntimeError(
                        f"register client {i} exited {proc.returncode}: "
                        f"{err.decode(errors='replace')[-2000:]}"
                    )
        finally:
            for proc in procs:
                if proc.poll() is None:
                    kill_session(proc)
                    proc.wait()
        records = [
            json.loads(line) for out in outs for line in out.read_text().splitlines()
        ]
    return dict(
        records=records,
        leader=leader,
        start_s=start,
        cut_s=cut_at,
        heal_from_s=heal_from,
        healed_s=healed_at,
    )


def paused_leader_history(etcd, before_s=1.5, cut_s=3.0, after_s=1.5) -> dict:
    """The register on a loopback ``EtcdCluster`` whose leader is paused, then resumed.

    Args:
        etcd: a running ``cl.control_plane.etcd_cluster.EtcdCluster`` of 3+ members.
        before_s, cut_s, after_s: seconds of writing before, during and after
            the pause, each in (0, 60].
    """
    before_s, cut_s, after_s = (
        check_float(name, v, 0.0, 60.0, low_inclusive=False)
        for name, v in (("before_s", before_s), ("cut_s", cut_s), ("after_s", after_s))
    )
    leader = etcd.wait_for_leader(etcd.start_timeout_s)
    pid = etcd.procs[leader].pid

    def popen(i, argv, **kw):
        return subprocess.Popen(argv, start_new_session=True, **kw)

    return run_history(
        etcd.n_members,
        lambda i: f"http://127.0.0.1:{etcd.client_ports[i]}",
        popen,
        lambda: os.kill(pid, signal.SIGSTOP),
        lambda: os.kill(pid, signal.SIGCONT),
        leader,
        before_s,
        cut_s,
        after_s,
    )


class EtcdOnNodes:
    """One etcd member on each node of an emulated cluster, on the node's address.

    The members listen on the nodes' own addresses (they exist only inside the
    nodes), so only processes on the nodes reach them: the status queries run
    there too.

    Args:
        cluster: a running ``cl.cluster.emulated.EmulatedCluster`` of 3+ nodes.
        start_timeout_s: seconds to wait for a leader, (0, 120].
    """

    def __init__(self, cluster, start_timeout_s: float = 30.0):
        self.cluster = cluster
        self.n_members = cluster.topology.nodes
        if self.n_members < 3:
            raise ValueError(
                f"cluster.topology.nodes={self.n_members}: a leader cut off from "
                "fewer than 3 members leaves no majority; use 3 to 7"
            )
        self.start_timeout_s = check_float(
            "start_timeout_s", start_timeout_s, 0.0, 120.0, low_inclusive=False
        )
        self.procs: list = []
        self._dir: tempfile.TemporaryDirectory | None = None

    def endpoint(self, node: int) -> str:
        return f"http://{self.cluster.address(node)}:2379"

    def __enter__(self) -> EtcdOnNodes:
        exe = shutil.which("etcd")
        if exe is None:
            raise RuntimeError(etcd_missing() or "no etcd on PATH")
        self._dir = tempfile.TemporaryDirectory(prefix="etcd-nodes-")
        peers = [
            f"http://{self.cluster.address(i)}:2380" for i in range(self.n_members)
        ]
        initial = ",".join(f"m{i}={u}" for i, u in enumerate(peers))
        try:
            for i, peer in enumerate(peers):
                client = self.endpoint(i)
                argv = member_argv(exe, i, self._dir.name, client, peer, initial)
                self.procs.append(
                    self.cluster.popen(
                        i, argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                    )
                )
            self.wait_for_leader(self.start_timeout_s)
            return self
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Kill every member and remove the data directories."""
        for proc in self.procs:
            kill_session(proc)
            proc.wait()
        self.procs = []
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def status(self, node: int) -> dict | None:
        """Member ``node``'s id and the leader it knows, asked from its node."""
        argv = _client_argv("--status", "--endpoint", self.endpoint(node))
        proc = self.cluster.popen(
            node, argv, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        try:
            out = proc.communicate(timeout=15)[0]
        except subprocess.TimeoutExpired:
            kill_session(proc)
            proc.wait()
            return None
        answer = json.loads(out or b"{}")
        return None if "error" in answer or not answer else answer

    def leader(self) -> int | None:
        """The node whose member the members say leads, or None."""
        seen = {i: self.status(i) for i in range(self.n_members)}
        ids = {s["member_id"]: i for i, s in seen.items() if s}
        votes = [s["leader"] for s in seen.values() if s and s.get("leader")]
        for lead in set(votes):
            if votes.count(lead) * 2 > self.n_members and lead in ids:
                return ids[lead]
        return None

    def wait_for_leader(self, timeout_s: float) -> int:
        """Block until a majority names one leader; return its node."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self.leader()
            if found is not None:
                return found
            time.sleep(0.1)
        raise RuntimeError(f"no etcd leader on the nodes within {timeout_s} s")


def partitioned_leader_history(cluster, etcd, before_s=1.5, cut_s=3.0, after_s=1.5):
    """The register on ``EtcdOnNodes``, the leader's node partitioned, then healed."""
    before_s, cut_s, after_s = (
        check_float(name, v, 0.0, 60.0, low_inclusive=False)
        for name, v in (("before_s", before_s), ("cut_s", cut_s), ("after_s", after_s))
    )
    leader = etcd.wait_for_leader(etcd.start_timeout_s)
    others = [i for i in range(etcd.n_members) if i != leader]
    return run_history(
        etcd.n_members,
        etcd.endpoint,
        cluster.popen,
        lambda: cluster.partition([leader], others),
        cluster.heal,
        leader,
        before_s,
        cut_s,
        after_s,
    )


__all__ = [
    "EtcdOnNodes",
    "paused_leader_history",
    "partitioned_leader_history",
    "run_history",
]
