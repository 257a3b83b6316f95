"""The rendezvous store is a single point of failure: kill its host, mid-job.

With ``--rdzv-backend c10d`` the store every agent meets at is a TCP server
inside one of the agents. Two elastic jobs run side by side on loopback, each
of two "nodes" (``torchrun --nnodes 1:2 --max-restarts 1``), node 0 hosting
the store (``--rdzv-conf is_host=1``). Once both nodes' workers are
all-reducing, one node is killed with its whole process tree: in one job the
store's host, in the other the other node. Every survivor's worker sees its
all-reduce fail; its agent then tries to meet again, alone (one node is
enough), through the store. Where the store lived on the dead node there is
nothing left to meet at, and the survivor gives up; where it lived on the
survivor, the job goes on at half its size::

    import clusterlab as cl
    table = cl.control_plane.store.kill_during_job()   # about 20 s
    cl.control_plane.check.check_store_is_single_point(table)

With ``backend="etcd"`` and the endpoint of an etcd server
(``cl.control_plane.etcd.EtcdServer``), the store lives outside every agent.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time

import pandas as pd

from clusterlab.clocks.rendezvous import _free_ports
from clusterlab.control_plane import ranks as control_plane_worker
from clusterlab.control_plane.ranks import PREFIX
from clusterlab.core import child
from clusterlab.core.torchrun import kill_session, torchrun_env
from clusterlab.core.validate import check_choice, check_float, check_int

_EXCEPTION = re.compile(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception))\b:?(.*)$")


JOBS = {"store host killed": 0, "other node killed": 1}


def agent_line(
    node: int,
    endpoint: str,
    rdzv_id: str,
    *,
    backend: str = "c10d",
    steps: int = 12,
    pause_s: float = 0.2,
    last_call_s: int = 3,
) -> list:
    """One elastic agent's command: 1 to 2 nodes, one restart, one rank.

    Args:
        node: 0 (hosts the c10d store) or 1.
        endpoint: ``host:port`` of the store (c10d) or of etcd.
        rdzv_id: the job's rendezvous id.
        backend: ``"c10d"`` or ``"etcd"`` (etcd's v2 API, ``python-etcd``).
        steps, pause_s: the worker's all-reduces and the pause between them.
        last_call_s: seconds an agent waits for more nodes once one is there.
    """
    check_int("node", node, 0, 1)
    check_choice("backend", backend, ("c10d", "etcd"))
    check_int("steps", steps, 1, 10_000)
    check_float("pause_s", pause_s, 0.0, 60.0)
    check_int("last_call_s", last_call_s, 1, 600)
    conf = f"join_timeout=30,last_call_timeout={last_call_s}"
    if backend == "c10d":
        conf += f",is_host={1 - node}"
    return [
        sys.executable, "-m", "torch.distributed.run", "--nnodes=1:2",
        "--nproc-per-node=1", f"--rdzv-backend={backend}",
        f"--rdzv-endpoint={endpoint}", f"--rdzv-id={rdzv_id}",
        f"--rdzv-conf={conf}", "--max-restarts=1", "--monitor-interval=0.1",
        control_plane_worker.__file__, str(steps), str(pause_s),
    ]  # fmt: skip


def exception_lines(lines, after: float = 0.0) -> list[str]:
    """The exceptions named in ``(time, line)`` pairs from ``after`` on, in order.

    A line's ANSI colours are stripped first (``cl.core.child.strip_ansi``): a
    child that coloured its traceback still names its exception.
    """
    found = []
    for t, line in list(lines):
        plain = child.strip_ansi(line).strip().lstrip("[").split("]: ")[-1]
        m = _EXCEPTION.match(plain)
        if t >= after and m and m.group(1) + m.group(2) not in found:
            found.append(m.group(1) + m.group(2))
    return found


class _Node:
    def __init__(self, job: str, node: int, cmd: list, env: dict):
        self.job, self.node, self.lines = job, node, []
        self.proc = subprocess.Popen(
            cmd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.ended: float | None = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def reports(self) -> list[dict]:
        lines = [x for _, x in list(self.lines) if PREFIX in x]
        return [json.loads(x.split(PREFIX, 1)[1]) for x in lines]

    def errors(self, after: float) -> list[str]:
        return exception_lines(self.lines, after)


def _row(n: _Node, killed: int, t_kill: float, steps: int, backend: str) -> dict:
    reps = n.reports()
    after = [r for r in reps if r["world_size"] == 1]
    errors = [] if n.node == killed else n.errors(t_kill)
    return {
        "job": n.job,
        "backend": backend,
        "node": n.node,
        "hosts_store": backend == "c10d" and n.node == 0,
        "killed": n.node == killed,
        "steps_together": sum(r["world_size"] == 2 for r in reps),
        "steps_alone": len(after),
        "went_on_alone": len(after) == steps,
        "exit_code": n.proc.returncode,
        "ended_after_kill_s": (n.ended or t_kill) - t_kill,
        "first_error": errors[0] if errors else "",
        "errors": " | ".join(errors),
        "output": "\n".join(x for _, x in n.lines),
    }


class _Missed(Exception):
    """The two nodes of a job did not meet: each started a job of its own."""


def kill_during_job(
    *,
    backend: str = "c10d",
    endpoint: str | None = None,
    steps: int = 12,
    pause_s: float = 0.2,
    last_call_s: int = 3,
    timeout_s: float = 150.0,
    tries: int = 3,
    jobs=tuple(JOBS),
) -> pd.DataFrame:
    """Run the two jobs side by side; kill node 0 in one, node 1 in the other.

    An elastic job of one to two nodes starts with one node if the other is not
    there within ``last_call_s`` of the first: on a busy machine an agent can
    take that long to start. Then the nodes never ran together, the run says
    so and starts again with twice the ``last_call_s``, ``tries`` times at most.

    Args:
        backend: ``"c10d"`` (the store in node 0's agent, on a free port) or
            ``"etcd"`` (``endpoint`` must then name a running etcd with v2).
        endpoint: the etcd server's ``host:port``; ignored for c10d.
        steps, pause_s, last_call_s: as for ``agent_line``.
        timeout_s: seconds for one try, (0, 600]; past it every process
            is killed and ``TimeoutError`` raised.
        tries: runs at most, [1, 5], while the two nodes fail to meet.
        jobs: which of the two jobs to run (keys of ``JOBS``), e.g. only
            ``("store host killed",)``, which costs half as much.

    Returns:
        One row per node and job: ``job, backend, node, hosts_store, killed,
        steps_together`` (all-reduces of two), ``steps_alone`` (of one, after
        the restart), ``went_on_alone``, ``exit_code, ended_after_kill_s,
        first_error, errors`` (exception lines the survivor printed after the
        kill, in order, module paths cut), ``output``.

    Raises:
        AssertionError: the two nodes of a job missed each other on every try.
    """
    check_choice("backend", backend, ("c10d", "etcd"))
    check_float("timeout_s", timeout_s, 0.0, 600.0, low_inclusive=False)
    check_int("tries", tries, 1, 5)
    jobs = {job: JOBS[check_choice("jobs", job, JOBS)] for job in jobs}
    if not jobs:
        raise ValueError(f"jobs=() must name at least one of {list(JOBS)}")
    if backend == "etcd" and not endpoint:
        raise ValueError("endpoint=None: the etcd backend needs etcd's host:port")
    from clusterlab.core.busy import retry

    def measure(attempt):
        wait_s = last_call_s * 2 ** (attempt - 1)
        try:
            return _attempt(jobs, backend, endpoint, steps, pause_s, wait_s, timeout_s)
        except _Missed as missed:
            return missed

    def judge(ran):
        if isinstance(ran, _Missed):
            return "miss", f"{ran}; the next try waits twice as long"
        return "pass", "the two nodes of every job met"

    return retry(
        measure,
        judge,
        what="the two nodes meeting",
        hint="an agent that never arrives within last_call_s, however long, "
        "did not start: read its output",
        tries=tries,
        numbered=True,
    ).result


def _attempt(jobs, backend, endpoint, steps, pause_s, last_call_s, timeout_s):
    stamp = f"{int(time.time() * 1e3) % 10**9}"
    ports = _free_ports(len(jobs))
    env = torchrun_env(LOGLEVEL="INFO", PYTHONSAFEPATH="1")
    nodes: dict[str, list[_Node]] = {}
    kills: dict[str, float] = {}
    try:
        deadline = time.monotonic() + timeout_s
        for node in (0, 1):
            for job, port in zip(jobs, ports, strict=True):
                ep = f"127.0.0.1:{port}" if backend == "c10d" else endpoint
                rdzv_id = f"{job.split()[0]}{stamp}"
                cmd = agent_line(
                    node, ep, rdzv_id, backend=backend, steps=steps,
                    pause_s=pause_s, last_call_s=last_call_s,
                )  # fmt: skip
                nodes.setdefault(job, []).append(_Node(job, node, cmd, env))
            time.sleep(0.3)  # node 0 first: it hosts the c10d store
        everyone = [n for ns in nodes.values() for n in ns]
        while len(kills) < len(jobs) or any(n.ended is None for n in everyone):
            now = time.monotonic()
            if now > deadline:
                raise TimeoutError(f"the jobs ran past timeout_s={timeout_s}")
            for job, ns in nodes.items():
                for n in ns:
                    if n.ended is None and n.proc.poll() is not None:
                        n.ended = now
                reports = [n.reports() for n in ns]
                together = [sum(r["world_size"] == 2 for r in rs) for rs in reports]
                alone = any(r["world_size"] == 1 for rs in reports for r in rs)
                if job not in kills and alone:
                    raise _Missed(
                        f"the nodes of job {job!r} did not arrive within "
                        f"last_call_s={last_call_s} s of each other"
                    )
                if job not in kills and min(together) >= 2:
                    kills[job] = time.monotonic()
                    kill_session(ns[jobs[job]].proc)
                elif job not in kills and any(n.ended for n in ns):
                    seen = " | ".join(e for n in ns for e in n.errors(0.0))
                    raise _Missed(
                        f"an agent of job {job!r} ended before the two ran "
                        f"together (it reported: {seen[-600:] or 'no error'})"
                    )
            time.sleep(0.05)
    finally:  # success or failure: no agent, rank or store outlives the call
        for ns in nodes.values():
            for n in ns:
                kill_session(n.proc)
        for ns in nodes.values():
            for n in ns:
                n.proc.wait()
                n.reader.join(timeout=5.0)
                n.proc.stdout.close()
    rows = [
        _row(n, jobs[job], kills[job], steps, backend)
        for job, ns in nodes.items()
        for n in ns
    ]
    return pd.DataFrame(rows)


__all__ = ["agent_line", "kill_during_job"]
