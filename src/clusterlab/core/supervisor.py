"""The launcher's side of a ``launch``: watch every rank, stop and report.

``_supervise`` waits on each rank's result pipe and process sentinel at once, so
a rank that raises, dies (even by SIGKILL) or outlives its deadline is noticed
within a fraction of a second. Once one rank fails the others get
``FAILURE_GRACE_S`` to report what they saw; once one finishes, the others get
the launch's timeout. ``_reap`` kills whatever is still running, with everything
it started, and ``_launch_error`` turns the reports into one ``LaunchError`` that
names the culprits first and carries their tracebacks.
"""

from __future__ import annotations

import contextlib
import multiprocessing.connection as mpc
import os
import pickle
import signal
import time
from dataclasses import dataclass

#: After the first rank fails, the others get this long to report what they saw.
FAILURE_GRACE_S = 1.0


_STDERR_TAIL_LINES = 30


class LaunchError(RuntimeError):
    """A launch failed: some rank raised, died, or never finished.

    Attributes:
        failed_ranks: ranks that raised, died or were stopped, worst first.
        reports: one ``RankReport`` per rank, index = rank.
        elapsed_s: seconds from start to the end of the launch.
    """

    def __init__(self, message: str, failed_ranks, reports, elapsed_s: float):
        super().__init__(message)
        self.failed_ranks = list(failed_ranks)
        self.reports = list(reports)
        self.elapsed_s = elapsed_s


@dataclass
class RankReport:
    """What one rank did: ``status`` is ok, error, died or stopped."""

    rank: int
    status: str = "running"
    value: object = None
    error: str = ""
    traceback: str = ""
    stdout: str = ""
    stderr: str = ""
    exitcode: int | None = None
    finished_s: float | None = None
    why: str = ""  # for a stopped rank: what ended the launch

    def summary(self) -> str:
        if self.status == "error":
            return f"rank {self.rank} raised {self.error}"
        if self.status == "died":
            return f"rank {self.rank} died ({_describe_exit(self.exitcode)})"
        if self.status == "stopped":
            return (
                f"rank {self.rank} was still running and was stopped "
                f"({self.why or 'the launch was ending'})"
            )
        return f"rank {self.rank} finished"


def _supervise(procs, readers, timeout, t0):
    """Wait for every rank; return reports. Never waits past the deadlines."""
    reports = [RankReport(rank) for rank in range(len(procs))]
    pending = set(range(len(procs)))
    deadline = None  # set once a rank finishes (ok: timeout; failure: grace)
    why = ""
    while pending:
        wait_for = [readers[r] for r in pending] + [procs[r].sentinel for r in pending]
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready = set(
            mpc.wait(wait_for, timeout=0.25 if left is None else min(left, 0.25))
        )
        for rank in sorted(pending):
            reader, proc = readers[rank], procs[rank]
            if reader in ready or (proc.sentinel in ready and reader.poll()):
                _receive(reports[rank], reader, proc)
            elif proc.sentinel in ready:
                proc.join(0.1)
                reports[rank].status = "died"
                reports[rank].exitcode = proc.exitcode
            else:
                continue
            reports[rank].finished_s = time.monotonic() - t0
            pending.discard(rank)
            if reports[rank].status != "ok":
                grace = time.monotonic() + min(timeout, FAILURE_GRACE_S)
                if deadline is None or grace < deadline:
                    deadline = grace
                    verb = "died" if reports[rank].status == "died" else "failed"
                    why = f"rank {rank} {verb}"
            elif deadline is None:
                deadline = time.monotonic() + timeout
                why = f"{timeout:g} s after rank {rank} finished"
        if pending and deadline is not None and time.monotonic() >= deadline:
            for rank in pending:
                reports[rank].status = "stopped"
                reports[rank].why = why
            break
    return reports


def _receive(report: RankReport, reader, proc) -> None:
    try:
        data = pickle.loads(reader.recv_bytes())
    except (EOFError, OSError):
        proc.join(0.5)
        report.status, report.exitcode = "died", proc.exitcode
        return
    report.status = data["status"]
    report.stdout = data.get("stdout", "")
    report.stderr = data.get("stderr", "")
    report.error = data.get("error", "")
    report.traceback = data.get("traceback", "")
    if report.status == "ok":
        report.value = pickle.loads(data["value"])


def _reap(procs) -> None:
    """Stop every rank still alive, with everything it started."""
    for proc in procs:
        if proc.pid is None:
            continue
        if proc.is_alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        proc.join(5.0)


def _describe_exit(code) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}, exit code {code}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code} before returning a result"


def _echo_stdout(reports) -> None:
    for report in reports:
        for line in report.stdout.splitlines():
            print(f"[rank {report.rank}] {line}")


def _launch_error(reports, world_size, elapsed_s) -> LaunchError:
    def blame(r):
        # A rank that timed out was waiting for another: list the culprits first.
        timed_out = r.status == "error" and "timed out" in r.error.lower()
        order = {"died": 0, "error": 1, "stopped": 2}[r.status] + 2 * timed_out
        return (order, r.finished_s or 1e9, r.rank)

    failed = sorted((r for r in reports if r.status != "ok"), key=blame)
    head = "; ".join(r.summary() for r in failed)
    lines = [f"launch of {world_size} rank(s) failed after {elapsed_s:.1f} s: {head}"]
    for r in failed:
        if r.traceback:
            lines += [f"--- traceback from rank {r.rank} ---", r.traceback.rstrip()]
        if r.stderr.strip():
            tail = r.stderr.strip().splitlines()[-_STDERR_TAIL_LINES:]
            lines += [f"--- stderr of rank {r.rank} (last lines) ---", *tail]
    return LaunchError("\n".join(lines), [r.rank for r in failed], reports, elapsed_s)


__all__ = ["FAILURE_GRACE_S", "LaunchError", "RankReport"]
