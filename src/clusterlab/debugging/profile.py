"""A ``torch.profiler`` trace of one data-parallel step, as a tidy DataFrame.

``profile_ddp_step`` runs a few steps of DistributedDataParallel on a small MLP
and profiles the last one on every rank. DDP all-reduces gradients in buckets
while the backward pass is still computing earlier layers, so communication and
computation overlap; the trace shows how much.

Each rank writes its Chrome trace (``rank<r>.json``, open it in Perfetto:
https://ui.perfetto.dev) and returns the profiler's events, which ``step_events``
keeps to the two lanes that matter:

* ``compute``: the forward pass and each backward function the autograd engine
  runs (``autograd::engine::evaluate_function: ...``), on the training thread,
  except gradient accumulation, where DDP's hooks fill (and wait for) buckets;
* ``communication``: each collective the backend ran (``gloo:all_reduce``,
  ``nccl:all_reduce``), on the backend's own threads.

``hidden_fraction`` is the share of communication time during which the
backward pass was computing: what the overlap hid.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile

import numpy as np
import pandas as pd

from clusterlab.core.validate import check_int

EVENT_COLUMNS = ["rank", "lane", "name", "start_s", "end_s", "dur_s"]


_BACKWARD = "autograd::engine::evaluate_function: "


_FORWARD = "DistributedDataParallel.forward"


_COMM_PREFIXES = ("gloo:", "nccl:")


# DDP's hooks run inside gradient accumulation: they copy the gradient into its
# bucket and may wait there, which is not computation.
_HOOKED = "AccumulateGrad"


def step_events(raw: list[tuple], rank: int = 0) -> pd.DataFrame:
    """The compute and communication events of a profiled step.

    Args:
        raw: ``(name, start_us, end_us)`` per profiler event.
        rank: the rank they came from.

    Returns:
        A DataFrame of ``EVENT_COLUMNS``, times in seconds from the step's first
        event, sorted by start.
    """
    rows = []
    for name, start_us, end_us in raw:
        if name.startswith(_COMM_PREFIXES):
            lane = "communication"
        elif name == _FORWARD or (
            name.startswith(_BACKWARD) and not name.endswith(_HOOKED)
        ):
            lane = "compute"
        else:
            continue
        short = name.removeprefix(_BACKWARD)
        rows.append((rank, lane, short, start_us * 1e-6, end_us * 1e-6))
    df = pd.DataFrame(rows, columns=EVENT_COLUMNS[:-1])
    if not df.empty:
        t0 = df["start_s"].min()
        df[["start_s", "end_s"]] -= t0
    df["dur_s"] = df["end_s"] - df["start_s"]
    return df.sort_values("start_s", ignore_index=True)


def _union(intervals) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [tuple(m) for m in merged]


def hidden_fraction(events: pd.DataFrame) -> float:
    """Share of one rank's communication time that overlapped backward compute.

    Args:
        events: ``step_events`` of one rank.

    Returns:
        In [0, 1]; NaN if there was no communication.
    """
    needed = {"lane", "name", "start_s", "end_s"}
    if not isinstance(events, pd.DataFrame) or not needed <= set(events.columns):
        raise ValueError(f"events must be a DataFrame with columns {sorted(needed)}")
    if "rank" in events and events["rank"].nunique() > 1:
        raise ValueError("events must come from one rank; select one first")
    comm = _union(
        events.loc[events["lane"] == "communication", ["start_s", "end_s"]].itertuples(
            index=False
        )
    )
    back = events[(events["lane"] == "compute") & (events["name"] != _FORWARD)]
    compute = _union(back[["start_s", "end_s"]].itertuples(index=False))
    total = sum(e - s for s, e in comm)
    if total <= 0:
        return float("nan")
    overlap = 0.0
    for cs, ce in comm:
        for bs, be in compute:
            overlap += max(0.0, min(ce, be) - max(cs, bs))
    return float(np.clip(overlap / total, 0.0, 1.0))


#: Kineto (the profiler's C++ half) prints ``USDT: ... profiler_start`` and
#: ``profiler_stop`` to stderr at every profile unless its level, read once per
#: process at the first profile, is above 5; with a level of 6 it prints nothing.
KINETO_QUIET_LEVEL = "6"
_KINETO_LINE = re.compile(r"^\s*(USDT|STAGE):")


@contextlib.contextmanager
def quiet_kineto():
    """Keep Kineto's progress lines (``USDT:``, ``STAGE:``) out of stderr.

    Sets ``KINETO_LOG_LEVEL`` (unless the reader set it) before the process's
    first profile, and, for a process whose Kineto started earlier, captures
    file descriptor 2 for the block and writes back every other line.
    """
    os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_QUIET_LEVEL)
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            text = caught.read().decode(errors="replace")
            kept = [ln for ln in text.splitlines(True) if not _KINETO_LINE.match(ln)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


def profile_step_worker(
    rank: int,
    world_size: int,
    *,
    width: int = 256,
    layers: int = 6,
    batch: int = 64,
    bucket_mb: float = 0.25,
    trace_dir: str | None = None,
) -> list[tuple]:
    """One rank: two warm-up DDP steps, then one profiled step.

    Returns:
        ``(name, start_us, end_us)`` of every profiler event of the step.
    """
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        *[
            m
            for _ in range(layers)
            for m in (torch.nn.Linear(width, width), torch.nn.ReLU())
        ]
    )
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=bucket_mb)
    x = torch.randn(batch, width, generator=torch.Generator().manual_seed(rank))
    for _ in range(2):  # the first steps build buckets and connections
        ddp(x).square().mean().backward()
    dist.barrier()
    with quiet_kineto(), profile(activities=[ProfilerActivity.CPU]) as prof:
        ddp(x).square().mean().backward()
    if trace_dir:
        prof.export_chrome_trace(os.path.join(trace_dir, f"rank{rank}.json"))
    return [(e.name, e.time_range.start, e.time_range.end) for e in prof.events()]


def _warm_profiler() -> None:
    """Profile nothing once here: the forked ranks inherit what it loaded.

    The first profile in a process loads much of the profiler (seconds on a
    busy machine); done once before the fork, no rank pays for it.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    with quiet_kineto(), profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.zeros(1).add_(1)
    prof.events()


def profile_ddp_step(
    world_size: int = 2,
    *,
    width: int = 256,
    layers: int = 6,
    bucket_mb: float = 0.25,
    trace_dir: str | None = None,
    timeout_s: float = 60.0,
) -> pd.DataFrame:
    """Profile one DDP step on every rank; return their events together.

    Args:
        world_size: ranks, in [1, 8].
        width: features of each Linear layer, in [8, 4096].
        layers: Linear layers, in [1, 64].
        bucket_mb: DDP's bucket size in MB: smaller buckets start communicating
            sooner and overlap more.
        trace_dir: where each rank writes ``rank<r>.json`` (Chrome trace), or None.
        timeout_s: the launch's timeout.

    Returns:
        ``step_events`` of every rank, concatenated.
    """
    from clusterlab.core.launcher import launch

    check_int("world_size", world_size, 1, 8)
    check_int("width", width, 8, 4096)
    check_int("layers", layers, 1, 64)
    if not 0.001 <= float(bucket_mb) <= 1024:
        raise ValueError(f"bucket_mb={bucket_mb} must be in [0.001, 1024]")
    if trace_dir is not None:
        os.makedirs(trace_dir, exist_ok=True)
    _warm_profiler()
    raw = launch(
        profile_step_worker,
        world_size,
        timeout=timeout_s,
        width=width,
        layers=layers,
        bucket_mb=float(bucket_mb),
        trace_dir=trace_dir,
    )
    return pd.concat(
        [step_events(r, rank) for rank, r in enumerate(raw)], ignore_index=True
    )


__all__ = [
    "EVENT_COLUMNS",
    "hidden_fraction",
    "profile_ddp_step",
    "profile_step_worker",
    "quiet_kineto",
    "step_events",
]
