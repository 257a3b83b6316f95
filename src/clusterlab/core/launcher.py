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

What runs inside a rank is in ``rank_main``; watching the ranks, stopping them
and reporting is in ``supervisor``. Try it from a shell:
``python -m clusterlab``.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
import warnings

from clusterlab.core.backend import (
    MAX_WORLD_SIZE,
    choose_backend,
    visible_gpus,
)
from clusterlab.core.rank_main import _rank_main
from clusterlab.core.supervisor import (
    _echo_stdout,
    _launch_error,
    _reap,
    _supervise,
)
from clusterlab.core.validate import check_choice, check_float, check_int


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


def _launch(fn, world_size, backend, timeout, start_method, kwargs, placement=None):
    """``launch`` with an optional forced start method (for benchmarks and tests).

    ``placement``, if given, is called in each forked rank before torch loads, as
    ``placement(rank)``; it moves the rank where it should run (a node of an
    emulated cluster) and returns the network interface gloo must use.
    """
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
                    placement,
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


__all__ = ["launch"]
