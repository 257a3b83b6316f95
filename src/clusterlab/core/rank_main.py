"""What runs inside each rank of a ``launch``: quiet it, join the group, report.

``cl.launch`` starts every rank at ``_rank_main``. The rank puts itself in
its own process group (so the launcher can kill everything it started), arranges
to die with the notebook's kernel, sends the C++ layers' chatter to a log file,
joins the process group through a file store, runs the worker and pipes back a
pickled report: its value (tensors moved to the CPU) or its exception and
traceback, and what it printed.
"""

from __future__ import annotations

import io
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from datetime import timedelta

from clusterlab.core.backend import loopback_interface
from clusterlab.core.child import quiet_colour_here


def _rank_main(
    fn,
    rank,
    world_size,
    backend,
    workdir,
    timeout,
    threads,
    conn,
    kwargs,
    parent_pid,
    placement=None,
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
    quiet_colour_here()  # a kernel's FORCE_COLOR would colour this rank's children
    os.environ["OMP_NUM_THREADS"] = str(threads)
    lo = loopback_interface()
    os.environ["GLOO_SOCKET_IFNAME"] = lo
    os.environ.setdefault("NCCL_SOCKET_IFNAME", lo)
    os.environ["TORCH_CPP_LOG_LEVEL"] = "ERROR"
    report = {"rank": rank, "status": "ok"}
    try:
        if placement is not None:
            # An emulated node: the rank enters it and uses that node's interface.
            os.environ["GLOO_SOCKET_IFNAME"] = placement(rank)
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
