"""Run a job with one injected fault and look at it the ways one debugs a real job.

``run_faulty_job`` starts ``hang_workers.faulty_training_worker`` on a few ranks
with a short timeout and reports what the job's own failure detector said: the
process group's timeout (gloo: "Timed out waiting ... for recv"), a crash, or,
with ``debug="DETAIL"``, the named mismatch. With ``dump=True`` it also takes a
stack dump of every rank while the job hangs, before the timeout ends it:

* with ``py-spy dump --pid PID`` where py-spy is installed and allowed to read
  another process (ptrace);
* otherwise with ``faulthandler``, which each rank registered on ``SIGUSR1``:
  the dump comes from C, so it works while a rank is blocked in a collective.

Every rank is stopped when the call returns, hung or not (``cl.launch``
kills them all when the timeout ends the job).

``TORCH_DISTRIBUTED_DEBUG=DETAIL`` is read when ``torch.distributed`` is
imported, so under ``torchrun`` it must be in the environment of the command.
The ranks here are forked from a process that imported torch already, so the
same level is set through ``torch.distributed.set_debug_level`` before the fork,
and restored after.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

import pandas as pd

from clusterlab.core.child import child_env, strip_ansi
from clusterlab.core.launcher import launch
from clusterlab.core.supervisor import LaunchError
from clusterlab.core.validate import check_choice, check_float, check_int
from clusterlab.debugging.ranks import FAULTS, faulty_training_worker

DEBUG_LEVELS = ("OFF", "INFO", "DETAIL")


DUMP_METHODS = ("auto", "py-spy", "faulthandler")


#: Seconds between the last rank's start of the faulty step and the dumps.
SETTLE_S = 0.5


@dataclass
class FaultyJob:
    """What one faulty job showed.

    Attributes:
        fault, culprit, world_size: what was injected, where.
        ok: whether the job ended without an error (only ``fault="none"``).
        error: the launch's error, first line (what the failure detector said).
        failed_ranks: ranks the launch reported, culprits first.
        rank_errors: rank -> its own error line.
        elapsed_s: seconds from start to end of the job.
        dumps: rank -> stack dump text (with ``dump=True``).
        dump_method: ``"py-spy"`` or ``"faulthandler"`` (or "" without dumps).
        note: why a fallback was taken, if one was.
        timings: one row per rank and step, with ``load_s``, ``compute_s`` and
            ``comm_s`` (NaN where the step never finished).
    """

    fault: str
    culprit: int
    world_size: int
    ok: bool
    error: str
    failed_ranks: list
    rank_errors: dict
    elapsed_s: float
    dumps: dict = field(default_factory=dict)
    dump_method: str = ""
    note: str = ""
    timings: pd.DataFrame = field(default_factory=pd.DataFrame)


def find_py_spy() -> str | None:
    """The ``py-spy`` executable: beside this Python, or on ``PATH``; else None."""
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which("py-spy")


@contextlib.contextmanager
def _debug_level(level: str):
    import torch.distributed as dist

    before = dist.get_debug_level()
    dist.set_debug_level(getattr(dist.DebugLevel, level))
    try:
        yield
    finally:
        dist.set_debug_level(before)


def _read_records(folder: str, world_size: int) -> list[dict]:
    events = []
    for rank in range(world_size):
        path = os.path.join(folder, f"rank{rank}.jsonl")
        with contextlib.suppress(OSError), open(path, encoding="utf-8") as f:
            events += [json.loads(line) for line in f if line.endswith("\n")]
    return events


def _timings(events: list[dict], world_size: int) -> pd.DataFrame:
    cols = ["rank", "step", "load_s", "compute_s", "comm_s"]
    started = [(e["rank"], e["step"]) for e in events if e["event"] == "start"]
    done = {(e["rank"], e["step"]): e for e in events if e["event"] == "done"}
    rows = [done.get(k, {"rank": k[0], "step": k[1]}) for k in started]
    df = pd.DataFrame(rows, columns=cols)
    return df.astype({"rank": int, "step": int}).sort_values(
        ["step", "rank"], ignore_index=True
    )


def _wait_until_stuck(folder, world_size, fault_step, deadline_s, runner) -> dict:
    """Rank -> pid once every rank started the faulty step; {} if the job ended."""
    while time.monotonic() < deadline_s and runner.is_alive():
        events = _read_records(folder, world_size)
        pids = {e["rank"]: e["pid"] for e in events if e["event"] == "ready"}
        starts = [
            e["time_s"]
            for e in events
            if e.get("step") == fault_step and e["event"] == "start"
        ]
        if len(pids) == world_size and len(starts) == world_size:
            time.sleep(SETTLE_S)
            return pids
        time.sleep(0.05)
    return {}


#: Terminal colour codes (``ESC [ ... m``) and other escape sequences.


def _py_spy_dump(py_spy: str, pid: int) -> tuple[str, str]:
    """(dump, "") or ("", why it failed)."""
    try:
        out = subprocess.run(
            [py_spy, "dump", "--pid", str(pid)],
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "", f"py-spy could not run: {exc}"
    if out.returncode != 0:
        why = (out.stderr.strip().splitlines() or ["no message"])[0]
        return "", f"py-spy dump failed (exit {out.returncode}): {why}"
    # py-spy colours its dump even into a pipe; a lab prints it on a light page,
    # where yellow and green text cannot be read, so the colour goes here.
    return strip_ansi(out.stdout), ""


def _faulthandler_dump(folder: str, rank: int, pid: int) -> str:
    path = os.path.join(folder, f"rank{rank}.stack")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGUSR1)
    text, deadline = "", time.monotonic() + 2.0
    while time.monotonic() < deadline:  # the rank writes from its signal handler
        with contextlib.suppress(OSError), open(path, encoding="utf-8") as f:
            text = f.read()
        if text.rstrip().endswith(")") or text.count("\n") > 3:
            break
        time.sleep(0.05)
    return text


def _dump_all(folder, pids, method) -> tuple[dict, str, str]:
    py_spy = find_py_spy() if method in ("auto", "py-spy") else None
    note = ""
    if method != "faulthandler" and py_spy is None:
        note = "py-spy is not installed (pip install py-spy): used faulthandler"
    dumps, used = {}, "py-spy" if py_spy else "faulthandler"
    for rank, pid in sorted(pids.items()):
        text = ""
        if used == "py-spy":
            text, why = _py_spy_dump(py_spy, pid)
            if not text:  # not permitted (ptrace), or the rank just ended
                used, note = "faulthandler", f"{why}; used faulthandler"
        dumps[rank] = text or _faulthandler_dump(folder, rank, pid)
    if used == "faulthandler" and dumps:  # one method for every rank
        dumps = {r: _faulthandler_dump(folder, r, p) for r, p in sorted(pids.items())}
    return dumps, used, note


def run_faulty_job(
    fault: str,
    world_size: int = 2,
    *,
    culprit: int = 1,
    fault_step: int = 1,
    steps: int = 3,
    timeout_s: float = 2.0,
    debug: str = "OFF",
    dump: bool = False,
    method: str = "auto",
    slow_load_s: float = 0.0,
) -> FaultyJob:
    """Run the faulty loop on ``world_size`` ranks and report what it showed.

    Args:
        fault: a key of ``hang_workers.FAULTS``.
        world_size: ranks, in [2, 8].
        culprit: the misbehaving rank, in [0, world_size).
        fault_step: the step the fault hits, in [0, steps).
        steps: training steps, in [1, 20].
        timeout_s: the process group's timeout, in [0.5, 60] s: how long a hang
            lasts before the job's failure detector ends it.
        debug: ``TORCH_DISTRIBUTED_DEBUG`` level, one of ``DEBUG_LEVELS``.
        dump: take a stack dump of every rank while the job hangs.
        method: ``"auto"`` (py-spy, else faulthandler), ``"py-spy"`` or
            ``"faulthandler"``.
        slow_load_s: seconds the culprit's loader takes per batch before it
            sticks (``fault="loader"``), in [0, 1].

    Returns:
        A ``FaultyJob``.
    """
    check_choice("fault", fault, tuple(FAULTS))
    world_size = check_int("world_size", world_size, 2, 8)
    check_int("culprit", culprit, 0, world_size - 1)
    steps = check_int("steps", steps, 1, 20)
    check_int("fault_step", fault_step, 0, steps - 1)
    timeout_s = check_float("timeout_s", timeout_s, 0.5, 60.0)
    check_choice("debug", debug, DEBUG_LEVELS)
    check_choice("method", method, DUMP_METHODS)
    check_float("slow_load_s", slow_load_s, 0.0, 1.0)
    if dump and timeout_s < 2 * SETTLE_S + 1.0:
        raise ValueError(f"timeout_s={timeout_s} must be >= 2 s to leave time to dump")
    folder = tempfile.mkdtemp(prefix="clusterlab-fault-")
    result: dict = {}

    def job():
        t0 = time.monotonic()
        try:
            with _debug_level(debug):
                launch(
                    faulty_training_worker,
                    world_size,
                    timeout=timeout_s,
                    fault=fault,
                    culprit=culprit,
                    fault_step=fault_step,
                    steps=steps,
                    slow_load_s=slow_load_s,
                    record_dir=folder,
                )
        except LaunchError as exc:
            result["error"] = exc
        result["elapsed_s"] = time.monotonic() - t0

    try:
        runner = threading.Thread(target=job, name="clusterlab-faulty-job")
        runner.start()
        dumps, used, note = {}, "", ""
        if dump:
            deadline = time.monotonic() + timeout_s + 30.0
            pids = _wait_until_stuck(folder, world_size, fault_step, deadline, runner)
            if runner.is_alive() and pids:
                dumps, used, note = _dump_all(folder, pids, method)
        runner.join()
        timings = _timings(_read_records(folder, world_size), world_size)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    err = result.get("error")
    reports = err.reports if err else []
    return FaultyJob(
        fault=fault,
        culprit=culprit,
        world_size=world_size,
        ok=err is None,
        error=str(err).splitlines()[0] if err else "",
        failed_ranks=list(err.failed_ranks) if err else [],
        rank_errors={r.rank: r.summary() for r in reports if r.status != "ok"},
        elapsed_s=result.get("elapsed_s", float("nan")),
        dumps=dumps,
        dump_method=used,
        note=note,
        timings=timings,
    )


__all__ = ["FaultyJob", "find_py_spy", "run_faulty_job"]
