"""Kill or freeze one rank of a real process group and record what the others see.

Every rank runs all-reduces in a loop. At step ``fault_step`` the victim either
kills itself with SIGKILL (a crash: the process and its sockets vanish) or
stops itself with SIGSTOP (a hang: the process is still there, its sockets stay
open, and it never answers). Each survivor notes when it entered the collective
that failed, when the exception reached it, and what the exception said, and
writes that to a file before the launcher stops it.

The launcher (``cl.launch``) watches every rank's process from outside, so
it names a dead rank at once. The survivors have no such view: they learn only
from their sockets (a closed connection) or from the process group's timeout.
``run_fault`` runs one such job and returns both views.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from dataclasses import dataclass

import pandas as pd

from clusterlab.core.launcher import launch
from clusterlab.core.supervisor import LaunchError
from clusterlab.core.validate import check_choice, check_float, check_int

FAULTS = ("kill", "freeze")


def fault_worker(
    rank: int,
    world_size: int,
    *,
    record_dir: str,
    fault: str = "kill",
    victim: int = 1,
    fault_step: int = 3,
    steps: int = 100_000,
) -> int:
    """All-reduce in a loop; the victim crashes or hangs; survivors record it.

    Args:
        rank, world_size: as given by the launcher.
        record_dir: folder for the records (``fault.json``, ``rank<r>.json``).
        fault: ``"kill"`` (SIGKILL) or ``"freeze"`` (SIGSTOP).
        victim: the rank that fails.
        fault_step: the loop step at which it fails.
        steps: loop length if nothing fails.

    Returns:
        The number of steps completed (only if nothing failed).
    """
    import torch
    import torch.distributed as dist

    nccl = dist.get_backend() == "nccl"
    x = torch.ones(1024, device=torch.device("cuda", rank) if nccl else "cpu")
    for step in range(steps):
        if rank == victim and step == fault_step:
            time.sleep(0.2)  # let the survivors enter the collective first
            _write(record_dir, "fault.json", {"rank": rank, "t": time.time()})
            sig = signal.SIGKILL if fault == "kill" else signal.SIGSTOP
            os.kill(os.getpid(), sig)
        entered = time.time()
        try:
            dist.all_reduce(x)
            if nccl:
                torch.cuda.synchronize()  # NCCL is asynchronous: wait for the result
        except Exception as exc:
            record = {
                "rank": rank,
                "step": step,
                "entered": entered,
                "failed": time.time(),
                "error": f"{type(exc).__name__}: {exc}",
            }
            _write(record_dir, f"rank{rank}.json", record)
            raise
        x /= world_size
    return steps


def _write(folder: str, name: str, record: dict) -> None:
    tmp = os.path.join(folder, f".{name}.tmp")
    with open(tmp, "w") as f:
        json.dump(record, f)
    os.replace(tmp, os.path.join(folder, name))  # readers never see half a file


@dataclass
class FaultRun:
    """One faulty job: what the launcher saw and what each survivor saw.

    Attributes:
        fault: ``"kill"`` or ``"freeze"``.
        timeout_s: the process group's timeout.
        error: the launcher's ``LaunchError`` (None if, oddly, nothing failed).
        elapsed_s: seconds from the start of the launch to its end.
        survivors: one row per survivor that recorded a failure: ``rank``,
            ``step``, ``learned_s`` (fault to exception), ``waited_s`` (entering
            the collective to exception) and ``error`` (first line).
    """

    fault: str
    timeout_s: float
    error: LaunchError | None
    elapsed_s: float
    survivors: pd.DataFrame


def run_fault(
    fault: str = "kill",
    world_size: int = 4,
    *,
    timeout_s: float = 60.0,
    victim: int = 1,
    fault_step: int = 3,
    backend: str = "auto",
) -> FaultRun:
    """Launch ``fault_worker`` on ``world_size`` ranks and collect both views.

    Args:
        fault: ``"kill"`` (SIGKILL) or ``"freeze"`` (SIGSTOP).
        world_size: ranks, in [2, 64].
        timeout_s: the process group's timeout, seconds, in (0, 3600].
        victim: the rank that fails, in [0, world_size - 1].
        fault_step: the step at which it fails, in [0, 1000].
        backend: as for ``cl.launch``.

    Returns:
        A ``FaultRun``.
    """
    check_choice("fault", fault, FAULTS)
    world_size = check_int("world_size", world_size, 2, 64)
    timeout_s = check_float("timeout_s", timeout_s, 0.0, 3600.0, low_inclusive=False)
    check_int("victim", victim, 0, world_size - 1)
    check_int("fault_step", fault_step, 0, 1000)
    with tempfile.TemporaryDirectory(prefix="clusterlab-fault-") as folder:
        start = time.monotonic()
        error = None
        try:
            launch(
                fault_worker,
                world_size,
                backend=backend,
                timeout=timeout_s,
                record_dir=folder,
                fault=fault,
                victim=victim,
                fault_step=fault_step,
            )
        except LaunchError as err:
            error = err
        elapsed_s = time.monotonic() - start
        survivors = _read_records(folder)
    return FaultRun(fault, timeout_s, error, elapsed_s, survivors)


def _read_records(folder: str) -> pd.DataFrame:
    columns = ["rank", "step", "learned_s", "waited_s", "error"]
    path = os.path.join(folder, "fault.json")
    if not os.path.exists(path):
        return pd.DataFrame(columns=columns)
    with open(path) as f:
        fault_t = json.load(f)["t"]
    rows = []
    for name in sorted(os.listdir(folder)):
        if name.startswith("rank") and name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                r = json.load(f)
            first = r["error"].splitlines()[0] if r["error"] else ""
            rows.append(
                (
                    r["rank"],
                    r["step"],
                    r["failed"] - fault_t,
                    r["failed"] - r["entered"],
                    first,
                )
            )
    return pd.DataFrame(rows, columns=columns).sort_values("rank", ignore_index=True)


__all__ = ["FaultRun", "fault_worker", "run_fault"]
