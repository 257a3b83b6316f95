"""Start a real process group from a notebook and bring each rank's result back.

``launch(fn, world_size)`` runs ``fn(rank, world_size, **kwargs)`` on
``world_size`` processes joined by ``torch.distributed`` and returns the list of
their return values (index = rank). On CPUs the ranks are forked, so a function
defined in a notebook cell works and a launch costs a fraction of a second; with
NCCL, or once CUDA is initialised, they are spawned and ``fn`` must be importable.

The guarantees every lab relies on:

* a rank that raises ends the launch with a ``LaunchError`` naming the rank and
  carrying its traceback; a rank that dies (even by SIGKILL) is reported at once;
* a rank that hangs is caught by the process group's timeout, and any rank still
  running ``timeout`` seconds after another finished is stopped and named;
* no process is left behind: ranks run in their own process groups, are killed
  on any failure or interrupt, and die with the notebook's kernel (Linux);
* the rendezvous is a file store in a fresh temporary folder (no port to collide
  on) and gloo traffic stays on the loopback interface;
* what ranks print is collected and shown after the job, prefixed by rank; the
  C++ layers' own chatter never reaches the notebook.

Try it from a shell: ``python -m clusterlab.dist``.
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import pickle
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
import warnings
from dataclasses import dataclass
from datetime import timedelta

from .._validate import check_choice, check_float, check_int
from .backend import MAX_WORLD_SIZE, choose_backend, loopback_interface, visible_gpus

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


def launch(
    fn, world_size: int, /, backend: str = "auto", timeout: float = 60.0, **kwargs
):
    """Run ``fn(rank, world_size, **kwargs)`` on ``world_size`` ranks; return results.

    Args:
        fn: the worker. Defined anywhere for a CPU (fork) launch; importable from
            a module for NCCL or after CUDA is initialised (spawn).
        world_size: number of ranks, in [1, 64].
        backend: ``"auto"`` (NCCL if each rank can have a GPU, else gloo),
            ``"gloo"`` or ``"nccl"``.
        timeout: seconds, in (0, 86400]: the process group's timeout for init and
            every collective, and how long ranks may run on after one finished.
        **kwargs: passed to ``fn`` unchanged.

    Returns:
        A list of the ranks' return values, index = rank (tensors come back on CPU).

    Raises:
        ValueError: a bad argument.
        LaunchError: a rank raised, died or hung.
    """
    return _launch(fn, world_size, backend, timeout, None, kwargs)


def _launch(fn, world_size, backend, timeout, start_method, kwargs):
    """``launch`` with an optional forced start method (for benchmarks and tests)."""
    if not callable(fn):
        raise ValueError(
            f"fn={fn!r} must be callable as fn(rank, world_size, **kwargs)"
        )
    world_size = check_int("world_size", world_size, 1, MAX_WORLD_SIZE)
    timeout = check_float("timeout", timeout, 0.0, 86400.0, low_inclusive=False)
    check_choice("backend", backend, ("auto", "gloo", "nccl"))
    if backend == "auto":
        backend = choose_backend(world_size)
    elif backend == "nccl" and visible_gpus() < world_size:
        raise ValueError(
            f"backend='nccl' with world_size={world_size} needs {world_size} GPUs, one "
            f"per rank, but {visible_gpus()} are visible: use backend='auto' or 'gloo'"
        )
    import torch.distributed  # noqa: F401 - imported once here, inherited by forks

    method = start_method or _start_method(backend)
    check_choice("start_method", method, ("fork", "spawn", "forkserver"))
    if method != "fork":
        _require_importable(fn, method)

    workdir = tempfile.mkdtemp(prefix="clusterlab-launch-")
    ctx = mp.get_context(method)
    # A forked rank must not use OpenMP threads: the parent's thread pool does not
    # survive fork, and a multi-threaded op in the child can then hang forever.
    threads = 1 if method == "fork" else max(1, (os.cpu_count() or 1) // world_size)
    procs, readers = [], []
    t0 = time.monotonic()
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns on fork from a threaded process (a Jupyter kernel);
            # the child only runs torch code and never touches the parent's threads.
            warnings.filterwarnings(
                "ignore", message=".*fork.*", category=DeprecationWarning
            )
            for rank in range(world_size):
                reader, writer = ctx.Pipe(duplex=False)
                args = (
                    fn,
                    rank,
                    world_size,
                    backend,
                    workdir,
                    timeout,
                    threads,
                    writer,
                    kwargs,
                    os.getpid(),
                )
                proc = ctx.Process(
                    target=_rank_main,
                    args=args,
                    daemon=True,
                    name=f"clusterlab-rank-{rank}",
                )
                proc.start()
                writer.close()
                procs.append(proc)
                readers.append(reader)
        reports = _supervise(procs, readers, timeout, t0)
    finally:
        _reap(procs)
        for reader in readers:
            reader.close()
        shutil.rmtree(workdir, ignore_errors=True)
    elapsed_s = time.monotonic() - t0
    _echo_stdout(reports)
    failed = [r for r in reports if r.status != "ok"]
    if failed:
        raise _launch_error(reports, world_size, elapsed_s)
    return [r.value for r in reports]


def _start_method(backend: str) -> str:
    import torch

    if backend == "nccl" or torch.cuda.is_initialized():
        return "spawn"  # CUDA cannot be used in a forked child
    return "fork" if "fork" in mp.get_all_start_methods() else "spawn"


def _require_importable(fn, method: str) -> None:
    qualname = getattr(fn, "__qualname__", "")
    module = getattr(fn, "__module__", None)
    main = sys.modules.get("__main__")
    in_notebook = module == "__main__" and not getattr(main, "__file__", None)
    if in_notebook or "<locals>" in qualname or "<lambda>" in qualname:
        raise ValueError(
            f"fn={getattr(fn, '__name__', fn)!r} is defined in a notebook or inside "
            f"another function, but this launch must use {method!r} (NCCL, or CUDA "
            "already initialised), which imports fn by name in each rank: move it to "
            "a .py file (for example with %%writefile) and import it from there"
        )


# ----------------------------------------------------------------- inside a rank
def _rank_main(
    fn, rank, world_size, backend, workdir, timeout, threads, conn, kwargs, parent_pid
):
    """Entry point of every rank: quiet the process, join the group, run fn, report."""
    os.setpgid(0, 0)  # own process group, so the launcher can kill all it started
    _die_with_parent(parent_pid)
    log_path = os.path.join(workdir, f"rank{rank}.log")
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log_fd, 1)  # C++ chatter (gloo, c10d) goes to a file, not the notebook
    os.dup2(log_fd, 2)
    out, err = io.StringIO(), io.StringIO()
    sys.stdout, sys.stderr = out, err
    os.environ["OMP_NUM_THREADS"] = str(threads)
    lo = loopback_interface()
    os.environ["GLOO_SOCKET_IFNAME"] = lo
    os.environ.setdefault("NCCL_SOCKET_IFNAME", lo)
    os.environ["TORCH_CPP_LOG_LEVEL"] = "ERROR"
    report = {"rank": rank, "status": "ok"}
    try:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(threads)
        init = {}
        if backend == "nccl":
            torch.cuda.set_device(rank)
            init["device_id"] = torch.device("cuda", rank)
        store = dist.FileStore(os.path.join(workdir, "store"), world_size)
        dist.init_process_group(
            backend,
            store=store,
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=timeout),
            **init,
        )
        # gloo connects every pair of ranks while the group is made; a rank that
        # raced ahead, failed at once and exited would break a peer still
        # connecting ("connectFullMesh failed"), hiding the real error. No rank
        # starts fn until every rank is connected.
        dist.barrier()
        value = fn(rank, world_size, **kwargs)
        report["value"] = pickle.dumps(_to_cpu(value))
        dist.destroy_process_group()
    except BaseException as exc:  # noqa: BLE001 - every failure is reported
        report.update(
            status="error",
            error=f"{type(exc).__name__}: {exc}",
            traceback=traceback.format_exc(),
        )
    report["stdout"], report["stderr"] = out.getvalue(), err.getvalue()
    try:
        conn.send_bytes(pickle.dumps(report))
    except Exception as exc:  # noqa: BLE001
        fallback = {
            "rank": rank,
            "status": "error",
            "stdout": report["stdout"],
            "error": f"could not send the result back: {exc}",
            "traceback": traceback.format_exc(),
        }
        conn.send_bytes(pickle.dumps(fallback))
    conn.close()


def _die_with_parent(parent_pid: int) -> None:
    """Make this rank end if the notebook's kernel dies, so none is orphaned."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    else:

        def watch():
            while os.getppid() == parent_pid:
                time.sleep(1.0)
            os._exit(1)

        threading.Thread(target=watch, daemon=True).start()
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def _to_cpu(value):
    """Move tensors to the CPU, so unpickling never initialises CUDA in the kernel."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, list | tuple) and not hasattr(value, "_fields"):
        return type(value)(_to_cpu(v) for v in value)
    return value


# ------------------------------------------------------------- in the launcher
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
