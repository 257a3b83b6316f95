"""Training steps that go wrong the ways real jobs do, one fault at a time.

``faulty_training_worker`` is a small data-parallel loop: each step loads a
batch, computes a gradient and all-reduces it. On one step (``fault_step``) one
rank (``culprit``) does something wrong:

* ``skip``: it skips that step's all-reduce, runs ahead, and waits in the
  barrier at the end of the loop while the others wait in their last all-reduce;
* ``mismatch_op``: it broadcasts where the others all-reduce;
* ``mismatch_shape``: it all-reduces a tensor one element longer;
* ``loader``: its data loader never returns the batch;
* ``deadlock``: it and its left-hand neighbour exchange a tensor, both with a
  blocking receive first, so neither ever sends.

Each rank appends one JSON line per event to ``rank<r>.jsonl`` in
``record_dir`` (a hung job returns nothing, so its timings must be written as it
goes) and, for stack dumps without ``py-spy``, asks ``faulthandler`` to write
every thread's Python stack to ``rank<r>.stack`` on ``SIGUSR1``.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import time

import torch
import torch.distributed as dist

#: Every fault the worker can inject, with what the culprit does.
FAULTS = {
    "none": "no fault: every rank runs every step",
    "skip": "the culprit skips one all-reduce and runs ahead",
    "mismatch_op": "the culprit broadcasts where the others all-reduce",
    "mismatch_shape": "the culprit all-reduces a tensor one element longer",
    "loader": "the culprit's data loader never returns a batch",
    "deadlock": "the culprit and its left neighbour both receive before sending",
}


#: How long a stuck data loader waits (it is killed long before).
STUCK_S = 3600.0


def load_batch(step: int, numel: int, *, delay_s: float = 0.0) -> torch.Tensor:
    """The data loader: a batch after ``delay_s`` seconds (a slow disk, a queue)."""
    time.sleep(delay_s)
    return torch.randn(numel, generator=torch.Generator().manual_seed(step))


def compute_gradient(batch: torch.Tensor) -> torch.Tensor:
    """The forward and backward pass, reduced to what the all-reduce needs."""
    return torch.tanh(batch) * 0.5


def exchange_with_peer(peer: int, grad: torch.Tensor) -> None:
    """Both ranks of a pair receive first: the classic send/recv deadlock."""
    inbox = torch.empty_like(grad)
    dist.recv(inbox, src=peer)  # waits for a send the peer never reaches
    dist.send(grad, dst=peer)


def _record(path, **event) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(event) + "\n")


def _faulty_exchange(fault, rank, world_size, culprit, grad):
    partner = (culprit - 1) % world_size  # the rank whose neighbour is the culprit
    if fault == "skip" and rank == culprit:
        return
    if fault == "mismatch_op" and rank == culprit:
        dist.broadcast(grad, src=0)
        return
    if fault == "mismatch_shape" and rank == culprit:
        dist.all_reduce(torch.cat([grad, grad.new_zeros(1)]))
        return
    if fault == "deadlock" and rank in (culprit, partner):
        exchange_with_peer(partner if rank == culprit else culprit, grad)
    dist.all_reduce(grad)


def faulty_training_worker(
    rank: int,
    world_size: int,
    *,
    fault: str = "none",
    culprit: int = 1,
    fault_step: int = 1,
    steps: int = 3,
    numel: int = 256,
    slow_load_s: float = 0.0,
    record_dir: str | None = None,
) -> list[dict]:
    """One rank of a data-parallel loop with one injected fault.

    Args:
        rank, world_size: given by the launcher.
        fault: a key of ``FAULTS``.
        culprit: the rank that misbehaves, in [0, world_size).
        fault_step: the step on which it does, in [0, steps).
        steps: training steps.
        numel: elements of the gradient.
        slow_load_s: seconds the culprit's loader takes per batch before it
            sticks (with ``fault="loader"``: the warning sign in the timings).
        record_dir: a folder for the per-rank records and stack files, or None.

    Returns:
        One dict per step with ``rank``, ``step``, ``load_s``, ``compute_s`` and
        ``comm_s`` (seconds), if the job ends at all.
    """
    base = os.path.join(record_dir, f"rank{rank}") if record_dir else None
    log = f"{base}.jsonl" if base else None
    if base:  # keep the file open: the handler writes to it from C, at any time
        stack_file = open(f"{base}.stack", "w")  # noqa: SIM115
        faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
        _record(log, event="ready", rank=rank, pid=os.getpid())
    rows = []
    for step in range(steps):
        _record(log, event="start", rank=rank, step=step, time_s=time.time())
        t0 = time.perf_counter()
        slow = fault == "loader" and rank == culprit
        stuck = slow and step == fault_step
        batch = load_batch(
            step, numel, delay_s=STUCK_S if stuck else slow * slow_load_s
        )
        t1 = time.perf_counter()
        grad = compute_gradient(batch)
        t2 = time.perf_counter()
        if step == fault_step and fault != "none":
            _faulty_exchange(fault, rank, world_size, culprit, grad)
        else:
            dist.all_reduce(grad)
        t3 = time.perf_counter()
        row = dict(rank=rank, step=step, load_s=t1 - t0, compute_s=t2 - t1)
        rows.append({**row, "comm_s": t3 - t2})
        _record(log, event="done", **rows[-1])
    dist.barrier()  # before a checkpoint: every rank must have finished its steps
    return rows


__all__ = [
    "FAULTS",
    "compute_gradient",
    "exchange_with_peer",
    "faulty_training_worker",
    "load_batch",
]
