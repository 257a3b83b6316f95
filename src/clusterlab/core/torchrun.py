"""Running a module under ``torchrun``, the launcher real clusters use, from Python.

``cl.launch`` is for notebooks. On a cluster the same code is started by
``torchrun`` (one agent per node, which starts one process per GPU and sets
``RANK``, ``WORLD_SIZE`` and the rendezvous for each). ``run_torchrun`` runs it
on this machine in a session of its own, so that a timeout or an interrupt kills
the agent and every rank it started.

``agent_command`` is the command line of one node's agent in a job of several
nodes (a c10d rendezvous, as on a cluster); ``torchrun_env`` and
``kill_session`` start and end such agents the same way ``run_torchrun`` does.
``torchrun`` starts each rank in a session of its own, so ``kill_session``
kills the agent's whole process tree, not only its process group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

from clusterlab.core.backend import MAX_WORLD_SIZE, loopback_interface
from clusterlab.core.child import child_env
from clusterlab.core.validate import check_float, check_int


def _check_module(module) -> str:
    if (
        not isinstance(module, str)
        or not module.replace(".", "").replace("_", "").isalnum()
    ):
        raise ValueError(f"module={module!r} must be a dotted module name")
    return module


def torchrun_command(
    module: str, nproc: int, *args: str, max_restarts: int = 0
) -> list:
    """The command line that starts ``python -m module`` on ``nproc`` local ranks."""
    _check_module(module)
    check_int("nproc", nproc, 1, MAX_WORLD_SIZE)
    check_int("max_restarts", max_restarts, 0, 100)
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        f"--max-restarts={max_restarts}",
        "-m",
        module,
        *map(str, args),
    ]


def agent_command(
    entry: str,
    *args: str,
    nnodes: int,
    nproc: int,
    rdzv_id: str,
    rdzv_endpoint: str,
    join_timeout_s: int | None = None,
    master_addr: str | None = None,
    master_port: int | None = None,
    max_restarts: int = 0,
    module: bool = True,
) -> list:
    """The command line of one node's agent in a multi-node c10d rendezvous.

    Args:
        entry: what every rank runs: a dotted module (``-m entry``), or with
            ``module=False`` the path of a Python file.
        *args: command-line arguments for the module.
        nnodes: nodes (agents) the rendezvous waits for, in [1, 64].
        nproc: ranks this agent starts, in [1, 64].
        rdzv_id: the job's rendezvous id; agents meet only if theirs are equal.
        rdzv_endpoint: ``host:port`` of the rendezvous store.
        join_timeout_s: seconds an agent waits for the others before it gives
            up (``--rdzv-conf join_timeout``), in [1, 86400]; None: torch's 600.
        master_addr, master_port: passed on as ``--master-addr/--master-port``,
            which only the static rendezvous reads (to show that c10d ignores them).
        max_restarts: restarts of the group after a failure, [0, 100].
        module: whether ``entry`` is a module name (True) or a file's path.

    Returns:
        The command, starting with ``sys.executable -m torch.distributed.run``.
    """
    if module:
        _check_module(entry)
    elif not isinstance(entry, str) or not entry.endswith(".py"):
        raise ValueError(f"entry={entry!r} must be the path of a .py file")
    check_int("nnodes", nnodes, 1, MAX_WORLD_SIZE)
    check_int("nproc", nproc, 1, MAX_WORLD_SIZE)
    check_int("max_restarts", max_restarts, 0, 100)
    if not isinstance(rdzv_id, str) or not rdzv_id or any(c.isspace() for c in rdzv_id):
        raise ValueError(f"rdzv_id={rdzv_id!r} must be a non-empty word")
    host, _, port = str(rdzv_endpoint).rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"rdzv_endpoint={rdzv_endpoint!r} must be 'host:port'")
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nnodes}"]
    cmd += [f"--nproc-per-node={nproc}", "--rdzv-backend=c10d"]
    cmd += [f"--rdzv-endpoint={rdzv_endpoint}", f"--rdzv-id={rdzv_id}"]
    if join_timeout_s is not None:
        check_int("join_timeout_s", join_timeout_s, 1, 86400)
        cmd.append(f"--rdzv-conf=join_timeout={join_timeout_s}")
    if master_addr is not None:
        cmd.append(f"--master-addr={master_addr}")
    if master_port is not None:
        cmd.append(f"--master-port={check_int('master_port', master_port, 1, 65535)}")
    cmd.append(f"--max-restarts={max_restarts}")
    return [*cmd, *(["-m"] if module else []), entry, *map(str, args)]


def torchrun_env(**extra: str) -> dict:
    """This process's environment for an agent: one thread, gloo on loopback.

    Args:
        **extra: further variables, e.g. ``LOGLEVEL="INFO"``.

    Returns:
        A copy of ``os.environ`` with ``OMP_NUM_THREADS=1``, ``GLOO_SOCKET_IFNAME``
        the loopback interface, unbuffered Python, quiet C++ logs and no colour
        (``cl.core.child.child_env``).
    """
    return child_env(
        OMP_NUM_THREADS="1",
        GLOO_SOCKET_IFNAME=loopback_interface(),
        PYTHONUNBUFFERED="1",
        TORCH_CPP_LOG_LEVEL="ERROR",
        **extra,
    )


def _parents() -> dict[int, int]:
    """Every process's parent: from /proc on Linux, from ``ps`` elsewhere."""
    table = {}
    if os.path.isdir("/proc/self"):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        stat = f.read()
                except OSError:  # it ended while we looked
                    continue
                table[int(entry)] = int(stat.rpartition(")")[2].split()[1])
        return table
    out = subprocess.run(
        ["ps", "-A", "-o", "pid=", "-o", "ppid="], capture_output=True, text=True
    ).stdout
    for line in out.splitlines():
        pid, ppid = line.split()
        table[int(pid)] = int(ppid)
    return table


def descendants(pid: int) -> list[int]:
    """The process ids of every living descendant of ``pid``."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found, todo = [], list(children.get(pid, []))
    while todo:
        found.append(todo.pop())
        todo.extend(children.get(found[-1], []))
    return found


def kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL the session ``proc`` leads, and every process it started.

    ``proc`` was started with ``start_new_session``. Killing its process group
    is not enough for ``torchrun``: the agent starts each rank in a session of
    its own, so its ranks would outlive it. The tree is read first, then the
    agent's group is killed (it can start nothing more), then each descendant
    and its group. A process that is already gone is no error. Once ``proc``
    has been reaped its pid may belong to another process, so then only its
    group is killed.
    """
    # poll() reaps only a process that has ended; while it has not, or while it
    # is a zombie we have not waited for, its pid cannot be reused.
    tree = descendants(proc.pid) if proc.poll() is None else []
    for pid in [proc.pid, *tree]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)  # pid leads a group: the whole group
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def run_torchrun(
    module: str,
    nproc: int,
    *args: str,
    max_restarts: int = 0,
    timeout: float = 120.0,
    check: bool = True,
) -> subprocess.CompletedProcess:
    """Run ``torchrun --standalone --nproc-per-node nproc -m module args...``.

    Args:
        module: an importable module with a ``__main__`` block, e.g.
            ``"clusterlab.message_passing.hello"``.
        nproc: ranks on this machine, in [1, 64].
        *args: command-line arguments for the module.
        max_restarts: how often torchrun restarts the group after a failure, [0, 100].
        timeout: seconds, in (0, 86400]; past it the whole job is killed.
        check: raise ``RuntimeError`` (with the output's tail) on a non-zero exit.

    Returns:
        The ``CompletedProcess``, with ``stdout`` and ``stderr`` as text.
    """
    cmd = torchrun_command(module, nproc, *args, max_restarts=max_restarts)
    timeout = check_float("timeout", timeout, 0.0, 86400.0, low_inclusive=False)
    proc = subprocess.Popen(
        cmd,
        env=torchrun_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:  # timeout or interrupt: kill the agent and its ranks
        kill_session(proc)
        proc.communicate()
        raise
    result = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    if check and proc.returncode != 0:
        tail = "\n".join((out + err).strip().splitlines()[-25:])
        raise RuntimeError(f"torchrun exited with code {proc.returncode}:\n{tail}")
    return result
