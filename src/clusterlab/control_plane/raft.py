"""A Raft cluster of real replicas on loopback: elect, write, kill, partition.

Each replica is a process of its own (``raft_replica.py``, a ``pysyncobj``
node with a replicated dictionary and a journal on disk), listening on a free
port of 127.0.0.1 chosen at run time. ``RaftCluster`` starts them, sends them
requests, kills and restarts them, and cuts the network between groups of
them; on leaving its ``with`` block, on success or failure, every replica is
killed and its port closed::

    import clusterlab as cl
    with cl.control_plane.raft.RaftCluster(3) as rc:
        leader = rc.wait_for_leader()
        print(rc.put(leader, "step", 1))      # committed by a majority
        rc.kill(leader)                       # the others elect a new leader
        print(rc.wait_for_leader())

The experiments built on it (leader kills, a minority cut off, the price of a
write) are in ``cl.control_plane.raft_experiments``.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time

from clusterlab.control_plane import raft_replica
from clusterlab.core.child import child_env
from clusterlab.core.torchrun import kill_session
from clusterlab.core.validate import check_float, check_int


def pysyncobj_available() -> bool:
    """Whether the ``pysyncobj`` package (a Raft library) is installed.

    It is looked up, not imported: importing it replaces ``socket.inet_ntop``
    in the importing process (with a stand-in for old Windows), which breaks
    other libraries there; only the replicas' own processes import it.
    """
    import importlib.util

    return importlib.util.find_spec("pysyncobj") is not None


def _free_ports(n: int) -> list[int]:
    import socket

    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


class _Replica:
    def __init__(self, addr: str, cmd: list, journal: str):
        self.addr, self.cmd, self.journal = addr, cmd, journal
        self.proc: subprocess.Popen | None = None
        self.answers: dict = {}
        self.reader: threading.Thread | None = None

    def start(self, events: list) -> None:
        self.proc = subprocess.Popen(
            self.cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
            env=child_env(PYTHONSAFEPATH="1"),
        )
        self.answers = {}
        self.reader = threading.Thread(
            target=self._read, args=(self.proc, events), daemon=True
        )
        self.reader.start()

    def _read(self, proc, events) -> None:
        for line in proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "event" in msg:
                events.append({**msg, "node": self.addr})
            elif msg.get("id") in self.answers:
                self.answers[msg["id"]].put(msg)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is None:
            return
        kill_session(self.proc)
        self.proc.wait()
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        self.reader.join(timeout=2.0)
        self.proc.stdout.close()


class RaftCluster:
    """``n`` Raft replicas on loopback, started on entering ``with``.

    Args:
        n_replicas: replicas, in [3, 9] (3 or 5 for the usual majorities).
        min_timeout_s, max_timeout_s: the election timeout is drawn uniformly
            from this range, in [0.05, 10] seconds, min < max.
        heartbeat_s: the leader's heartbeat period, below ``min_timeout_s``.
        batch: True: the leader sends new entries only with its next heartbeat
            (more writes per message, up to ``heartbeat_s`` more latency);
            False: at once.
    """

    def __init__(
        self,
        n_replicas: int = 3,
        *,
        min_timeout_s: float = 0.4,
        max_timeout_s: float = 0.8,
        heartbeat_s: float = 0.05,
        batch: bool = False,
    ):
        check_int("n_replicas", n_replicas, 3, 9)
        check_float("min_timeout_s", min_timeout_s, 0.05, 10.0)
        check_float("max_timeout_s", max_timeout_s, 0.05, 10.0)
        if max_timeout_s <= min_timeout_s:
            raise ValueError(
                f"max_timeout_s={max_timeout_s} must exceed "
                f"min_timeout_s={min_timeout_s}"
            )
        check_float("heartbeat_s", heartbeat_s, 0.001, min_timeout_s)
        self.n = n_replicas
        self.min_timeout_s, self.max_timeout_s = min_timeout_s, max_timeout_s
        self.heartbeat_s = heartbeat_s
        if not isinstance(batch, bool):
            raise ValueError(f"batch={batch!r} must be True or False")
        self.batch = batch
        self.events: list = []  # state changes of every replica, in arrival order
        self.replicas: dict[str, _Replica] = {}
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._next_id = 0
        self._lock = threading.Lock()

    # -- life cycle ---------------------------------------------------------
    def __enter__(self) -> RaftCluster:
        self._tmp = tempfile.TemporaryDirectory(prefix="raft-")
        addrs = [f"127.0.0.1:{p}" for p in _free_ports(self.n)]
        try:
            for i, addr in enumerate(addrs):
                peers = ",".join(a for a in addrs if a != addr)
                journal = os.path.join(self._tmp.name, f"r{i}.journal")
                cmd = [sys.executable, raft_replica.__file__, addr, peers]
                cmd += [f"--min-timeout-s={self.min_timeout_s}"]
                cmd += [f"--max-timeout-s={self.max_timeout_s}"]
                cmd += [f"--heartbeat-s={self.heartbeat_s}", f"--journal={journal}"]
                cmd += ["--batch"] if self.batch else []
                self.replicas[addr] = _Replica(addr, cmd, journal)
                self.replicas[addr].start(self.events)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Kill every replica (and its process group); remove the journals."""
        for rep in self.replicas.values():
            rep.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    @property
    def addresses(self) -> list[str]:
        """Every replica's ``host:port``, alive or not."""
        return list(self.replicas)

    def alive(self) -> list[str]:
        """The addresses of the replicas whose process is running."""
        return [a for a, r in self.replicas.items() if r.alive()]

    def kill(self, addr: str) -> float:
        """SIGKILL one replica; return the monotonic time of the kill."""
        rep = self._replica(addr)
        t = time.monotonic()
        rep.stop()
        return t

    def restart(self, addr: str) -> None:
        """Start a killed replica again, with its journal (its term, vote, log)."""
        rep = self._replica(addr)
        if rep.alive():
            raise ValueError(f"addr={addr!r} is still running")
        rep.start(self.events)

    # -- requests -----------------------------------------------------------
    def _replica(self, addr: str) -> _Replica:
        if addr not in self.replicas:
            raise ValueError(f"addr={addr!r} is not one of {self.addresses}")
        return self.replicas[addr]

    def request(self, addr: str, op: str, wait_s: float = 5.0, **fields) -> dict:
        """Send one request to a replica and wait for its answer.

        Returns:
            The answer, or ``{"error": "no answer"}`` if none came in ``wait_s``.
        """
        rep = self._replica(addr)
        with self._lock:
            self._next_id += 1
            rid = self._next_id
        box: queue.Queue = queue.Queue()
        rep.answers[rid] = box
        try:
            rep.proc.stdin.write(json.dumps({"id": rid, "op": op, **fields}) + "\n")
            rep.proc.stdin.flush()
            return box.get(timeout=wait_s)
        except (OSError, ValueError, queue.Empty):
            return {"id": rid, "error": "no answer"}
        finally:
            rep.answers.pop(rid, None)

    def status(self, addr: str) -> dict:
        """A replica's state, leader, term and commit index."""
        return self.request(addr, "status", wait_s=2.0)

    def put(self, addr: str, key: str, value, timeout_s: float = 2.0) -> dict:
        """Write ``key = value`` through replica ``addr``; wait for the commit.

        Returns:
            ``{"ok": committed?, "latency_s": ..., "error": ...}``.
        """
        check_float("timeout_s", timeout_s, 0.0, 60.0, low_inclusive=False)
        return self.request(
            addr,
            "put",
            wait_s=timeout_s + 3.0,
            key=key,
            value=value,
            timeout_s=timeout_s,
        )

    def data(self, addr: str) -> dict:
        """The replicated dictionary as replica ``addr`` has applied it."""
        return self.request(addr, "data", wait_s=2.0).get("data", {})

    def partition(self, *groups) -> None:
        """Cut the network between groups of addresses (each talks within itself)."""
        everyone = set(self.addresses)
        for group in groups:
            for addr in group:
                self.request(addr, "block", peers=sorted(everyone - set(group)))

    def heal(self) -> None:
        """Restore the network between every pair of living replicas."""
        for addr in self.alive():
            self.request(addr, "block", peers=[])

    def leader(self, among=None) -> str | None:
        """The replica that says it is leader, if exactly one of ``among`` does."""
        among = self.alive() if among is None else among
        leaders = [a for a in among if self.status(a).get("state") == "leader"]
        return leaders[0] if len(leaders) == 1 else None

    def wait_for_leader(self, among=None, timeout_s: float = 10.0) -> str:
        """Wait until one of ``among`` leads with a quorum; return its address.

        Raises:
            TimeoutError: no leader within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            addr = self.leader(among)
            if addr is not None and self.status(addr).get("has_quorum"):
                return addr
            time.sleep(0.02)
        raise TimeoutError(f"no leader among {among or self.alive()} in {timeout_s} s")

    def wait_caught_up(self, addr: str, leader: str, timeout_s: float = 10.0) -> None:
        """Wait until ``addr`` follows ``leader`` and has applied its commits.

        Raises:
            TimeoutError: it has not within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            me, lead = self.status(addr), self.status(leader)
            if me.get("leader") == leader and me.get("commit_idx", -1) >= lead.get(
                "commit_idx", 0
            ):
                return
            time.sleep(0.02)
        raise TimeoutError(f"{addr} did not catch up with {leader} in {timeout_s} s")


__all__ = ["RaftCluster", "pysyncobj_available"]
