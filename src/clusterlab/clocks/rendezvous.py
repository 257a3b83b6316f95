"""Rendezvous ids: a launch that hangs because each node read its own clock.

A job that ``torchrun`` starts on several nodes begins with a rendezvous: each
node's agent connects to one store (``--rdzv-endpoint``) and waits there, under
the job's name (``--rdzv-id``), until ``--nnodes`` agents have arrived with the
same name. A launch script that names the job after the time,
``--rdzv_id=training_job_$(date +%Y%m%d_%H%M%S)``, runs ``date`` separately on
every node: nodes that read their clocks in different seconds wait under
different names, each for agents that never come, until the join timeout ends
the launch. Naming the job after something every node shares (``$SLURM_JOB_ID``
under SLURM) fixes it. ``--master-addr`` and ``--master-port`` change nothing
here: only the static rendezvous reads them.

``compare_rendezvous_ids`` runs both launch lines for real, as two agents on
loopback started 1.5 s apart, each through ``sh`` so that the id is computed the
way the script computes it, on its node, as the agent starts::

    import clusterlab as cl
    runs = cl.clocks.rendezvous.compare_rendezvous_ids()   # about 20 s on two cores
    cl.clocks.rendezvous.check_rendezvous_ids(runs)

or, from a shell, ``python -m clusterlab.clocks.rendezvous``.
``cl.models.rendezvous.split_probability`` says how often date-stamped ids
disagree when the nodes' clock readings are spread over a window (start-up
jitter plus clock skew).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import shlex
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field

import pandas as pd

from clusterlab.clocks import rendezvous_worker
from clusterlab.clocks.rendezvous_worker import PREFIX
from clusterlab.core import child
from clusterlab.core.torchrun import agent_command, kill_session, torchrun_env
from clusterlab.core.validate import check_choice, check_float, check_int

# How each node computes its rendezvous id: the essay's script, and the fix.
ID_SOURCES = {
    "date": "training_job_$(date +%Y%m%d_%H%M%S)",
    "slurm_job_id": "$SLURM_JOB_ID",
}


# The worker runs as a file, not with -m: a module of this package would import
# the whole package (charts and widgets included) in every rank, seconds each.
WORKER = rendezvous_worker.__file__


_ID_LINE = "rdzv-id "


_SLOT = "@RDZV_ID@"


_EXCEPTION = re.compile(r"^(?:\w+\.)*(\w+(?:Error|Exception))\b(.*)$")


def node_script(
    id_source: str,
    endpoint: str,
    *,
    join_timeout_s: int = 8,
    master_addr: str | None = None,
) -> str:
    """The ``sh`` line one node runs: compute the id, print it, exec the agent.

    Args:
        id_source: a key of ``ID_SOURCES``: ``"date"`` (the essay's
            ``training_job_$(date +%Y%m%d_%H%M%S)``) or ``"slurm_job_id"``.
        endpoint: ``host:port`` of the rendezvous store.
        join_timeout_s: seconds the agent waits for the other node, [1, 600].
        master_addr: passed as ``--master-addr`` (port 9), which c10d ignores.

    Returns:
        A shell command for ``sh -c``.
    """
    expr = ID_SOURCES[check_choice("id_source", id_source, ID_SOURCES)]
    check_int("join_timeout_s", join_timeout_s, 1, 600)
    cmd = agent_command(
        WORKER,
        module=False,
        nnodes=2,
        nproc=1,
        rdzv_id=_SLOT,
        rdzv_endpoint=endpoint,
        join_timeout_s=join_timeout_s,
        master_addr=master_addr,
        master_port=None if master_addr is None else 9,
    )
    agent = shlex.join(cmd).replace(_SLOT, '"$id"')
    return f'id={expr}; echo "{_ID_LINE}$id"; exec {agent}'


@dataclass
class _Agent:
    ids: str
    node: int
    endpoint: str
    master_addr: str | None
    proc: subprocess.Popen
    started: float
    lines: list = field(default_factory=list)  # (monotonic time, text)
    ended: float | None = None
    reader: threading.Thread | None = None


def _read(agent: _Agent) -> None:
    for line in agent.proc.stdout:
        agent.lines.append((time.monotonic(), line.rstrip("\n")))


def exceptions_in(lines: list[str]) -> list[str]:
    """Each exception a child's lines name (``Name: message``), colours stripped."""
    plain = (child.strip_ansi(line) for line in lines)
    return [m.group(1) + m.group(2) for m in map(_EXCEPTION.match, plain) if m]


def _start(ids, node, endpoint, master_addr, join_timeout_s, env) -> _Agent:
    script = node_script(
        ids, endpoint, join_timeout_s=join_timeout_s, master_addr=master_addr
    )
    proc = subprocess.Popen(
        ["sh", "-c", script],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # the agent and its ranks: one group to kill
    )
    agent = _Agent(ids, node, endpoint, master_addr, proc, time.monotonic())
    agent.reader = threading.Thread(target=_read, args=(agent,), daemon=True)
    agent.reader.start()
    return agent


def _free_ports(n: int) -> list[int]:
    """``n`` different free ports on loopback (all held open while chosen)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def _first(agent: _Agent, text: str) -> float | None:
    return next((t for t, line in agent.lines if text in line), None)


def _report(agent: _Agent, join_timeout_s: int) -> dict:
    lines = [line for _, line in agent.lines]
    rdzv_id = next((x[len(_ID_LINE) :] for x in lines if x.startswith(_ID_LINE)), "")
    worker = next((json.loads(x[len(PREFIX) :]) for x in lines if PREFIX in x), {})
    errors = exceptions_in(lines)
    joined = _first(agent, "Rendezvous'ing worker group")
    met_at = _first(agent, "Rendezvous complete")
    waited = math.nan if joined is None else (met_at or agent.ended) - joined
    met = worker.get("world_size") == 2
    reason = PREFIX + json.dumps(worker) if met else (errors or lines or [""])[-1]
    return {
        "ids": agent.ids,
        "node": agent.node,
        "rdzv_id": rdzv_id,
        "met": met,
        "exit_code": agent.proc.returncode,
        "waited_s": waited,
        "elapsed_s": agent.ended - agent.started,
        "allreduce": worker.get("allreduce", math.nan),
        "master_given": agent.master_addr or "",
        "master_seen": worker.get("master", ""),
        "reason": reason.strip(),
        "endpoint": agent.endpoint,
        "join_timeout_s": join_timeout_s,
        "output": "\n".join(lines),
    }


def _launches(launches, join_timeout_s, stagger_s, job_id, timeout_s):
    """Run each (id source, master addresses) launch as two nodes, side by side."""
    check_int("join_timeout_s", join_timeout_s, 1, 600)
    check_float("stagger_s", stagger_s, 0.0, 10.0)
    check_float("timeout_s", timeout_s, 0.0, 600.0, low_inclusive=False)
    if not isinstance(job_id, str) or not job_id.isalnum():
        raise ValueError(f"job_id={job_id!r} must be letters and digits")
    plans = []
    for (ids, addrs), port in zip(launches, _free_ports(len(launches)), strict=True):
        check_choice("id_source", ids, ID_SOURCES)
        addrs = (None, None) if addrs is None else tuple(addrs)
        if len(addrs) != 2:
            raise ValueError(f"master_addrs={addrs!r} must name 2 addresses")
        plans.append((ids, f"127.0.0.1:{port}", addrs))
    # INFO logs say when an agent joins and meets; PYTHONSAFEPATH keeps the
    # worker file's folder (this package's modules) off the ranks' sys.path.
    env = torchrun_env(LOGLEVEL="INFO", SLURM_JOB_ID=job_id, PYTHONSAFEPATH="1")
    agents: list[_Agent] = []
    try:
        deadline = time.monotonic() + timeout_s
        for node in (0, 1):
            if node:
                time.sleep(stagger_s)
            for ids, endpoint, addrs in plans:
                agents.append(
                    _start(ids, node, endpoint, addrs[node], join_timeout_s, env)
                )
        while True:
            now = time.monotonic()
            for agent in agents:
                if agent.ended is None and agent.proc.poll() is not None:
                    agent.ended = now
            if all(agent.ended is not None for agent in agents):
                break
            if now > deadline:
                raise TimeoutError(f"the agents ran past timeout_s={timeout_s}")
            time.sleep(0.02)
    finally:  # on every path, success included: no process outlives the call
        for agent in agents:
            kill_session(agent.proc)
        for agent in agents:
            agent.proc.wait()
            agent.reader.join(timeout=5.0)
            agent.proc.stdout.close()
    order = {ids: i for i, (ids, _, _) in enumerate(plans)}
    agents.sort(key=lambda a: (order[a.ids], a.node))
    return pd.DataFrame([_report(a, join_timeout_s) for a in agents])


def run_two_nodes(
    id_source: str,
    *,
    join_timeout_s: int = 8,
    stagger_s: float = 1.5,
    master_addrs: tuple | None = None,
    job_id: str = "4242",
    timeout_s: float = 60.0,
) -> pd.DataFrame:
    """Start two agents (two "nodes") on loopback ``stagger_s`` apart; report.

    Args:
        id_source: how each node computes its id, a key of ``ID_SOURCES``.
        join_timeout_s: seconds each agent waits for the other, [1, 600].
        stagger_s: seconds between the two starts, [0, 10]; above 1 s the two
            date-stamped ids are always different seconds.
        master_addrs: one ``--master-addr`` per node (c10d ignores them), or None.
        job_id: ``$SLURM_JOB_ID`` in both nodes' environment, as SLURM sets it.
        timeout_s: seconds for the whole run, (0, 600]; past it every process
            is killed and ``TimeoutError`` raised.

    Returns:
        One row per node: ``ids, node, rdzv_id, met, exit_code,
        waited_s`` (at the rendezvous), ``elapsed_s`` (start to exit),
        ``allreduce`` (NaN if the worker never ran), ``master_given,
        master_seen, reason`` (the worker's report, or the last exception line
        without its module path), ``endpoint, join_timeout_s, output``.
    """
    launch = [(id_source, master_addrs)]
    return _launches(launch, join_timeout_s, stagger_s, job_id, timeout_s)


def compare_rendezvous_ids(
    *,
    join_timeout_s: int = 8,
    stagger_s: float = 1.5,
    job_id: str = "4242",
    timeout_s: float = 60.0,
) -> pd.DataFrame:
    """The essay's date-stamped ids beside one job id with wrong master addresses.

    The two launches run at the same time, on two endpoints, so that the second
    costs no time of its own while the first waits out its join timeout.

    Args:
        join_timeout_s, stagger_s, job_id, timeout_s: as for ``run_two_nodes``.

    Returns:
        ``run_two_nodes``'s rows for ``"date"``, then for ``"slurm_job_id"``.
    """
    wrong = ("192.0.2.1", "192.0.2.2")  # documentation addresses: nothing there
    launches = [("date", None), ("slurm_job_id", wrong)]
    return _launches(launches, join_timeout_s, stagger_s, job_id, timeout_s)


def check_rendezvous_ids(runs: pd.DataFrame) -> None:
    """Raise ``AssertionError`` unless the runs show the bug and its fix.

    Date-stamped ids: the two ids differ, neither agent met the other or ran
    the worker, both exited with an error, every reason is a rendezvous error
    (at least one ``RendezvousTimeoutError``) and the launch lasted the whole
    join timeout. One job id: both agents met, exited 0, summed 1 + 2 = 3 and
    were given a master address other than the ones passed on the command line.
    """
    for ids in ID_SOURCES:
        if (runs["ids"] == ids).sum() != 2:
            raise AssertionError(f"expected 2 rows with ids={ids!r}: {runs['ids']}")
    date, job = (runs[runs["ids"] == ids] for ids in ID_SOURCES)
    stamped = date["rdzv_id"].str.fullmatch(r"training_job_\d{8}_\d{6}")
    if date["rdzv_id"].nunique() != 2 or not stamped.all():
        raise AssertionError(f"date ids not two distinct stamps: {list(date.rdzv_id)}")
    if date["met"].any() or (date["exit_code"] == 0).any():
        raise AssertionError("agents with different ids met: that cannot be")
    rdzv_errors = date["reason"].str.match(r"Rendezvous(Timeout|Connection)Error")
    if not rdzv_errors.all() or not date["reason"].str.match("RendezvousTimeout").any():
        raise AssertionError(f"not a rendezvous timeout: {list(date['reason'])}")
    if date["elapsed_s"].max() < date["join_timeout_s"].iloc[0]:
        raise AssertionError("the date-id launch ended before its join timeout")
    if job["rdzv_id"].nunique() != 1 or not job["met"].all():
        raise AssertionError(f"one job id, yet no meeting: {list(job['reason'])}")
    if (job["exit_code"] != 0).any() or not (job["allreduce"] == 3.0).all():
        raise AssertionError(f"wrong exit or sum: {list(job['allreduce'])}")
    hosts = job["master_seen"].str.rpartition(":")[0]
    if (hosts == job["master_given"]).any() or (job["master_given"] == "").any():
        raise AssertionError("the workers used --master-addr: c10d should ignore it")


if __name__ == "__main__":
    table = compare_rendezvous_ids()
    cols = ["ids", "node", "rdzv_id", "met", "exit_code", "waited_s", "reason"]
    print(table[cols].round(1).to_string(index=False))
    check_rendezvous_ids(table)


__all__ = [
    "ID_SOURCES",
    "check_rendezvous_ids",
    "compare_rendezvous_ids",
    "node_script",
    "run_two_nodes",
]
