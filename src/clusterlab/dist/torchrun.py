"""Running a module under ``torchrun``, the launcher real clusters use, from Python.

``cl.dist.launch`` is for notebooks. On a cluster the same code is started by
``torchrun`` (one agent per node, which starts one process per GPU and sets
``RANK``, ``WORLD_SIZE`` and the rendezvous for each). ``run_torchrun`` runs it
on this machine in a session of its own, so that a timeout or an interrupt kills
the agent and every rank it started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

from .._validate import check_float, check_int
from .backend import MAX_WORLD_SIZE, loopback_interface


def torchrun_command(
    module: str, nproc: int, *args: str, max_restarts: int = 0
) -> list:
    """The command line that starts ``python -m module`` on ``nproc`` local ranks."""
    if (
        not isinstance(module, str)
        or not module.replace(".", "").replace("_", "").isalnum()
    ):
        raise ValueError(f"module={module!r} must be a dotted module name")
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
            ``"clusterlab.dist.hello"``.
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
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        GLOO_SOCKET_IFNAME=loopback_interface(),
        PYTHONUNBUFFERED="1",
        TORCH_CPP_LOG_LEVEL="ERROR",
    )
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:  # timeout or interrupt: kill the agent and its ranks
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    result = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    if check and proc.returncode != 0:
        tail = "\n".join((out + err).strip().splitlines()[-25:])
        raise RuntimeError(f"torchrun exited with code {proc.returncode}:\n{tail}")
    return result
