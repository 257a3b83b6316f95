"""Pipeline parallelism by hand: stages on ranks, micro-batches over send/recv.

A model of ``p`` layers is cut into ``p`` stages, one per rank. A batch is cut
into ``m`` micro-batches. Rank ``s`` receives a micro-batch's activations from
rank ``s - 1``, runs its layer and sends the result to rank ``s + 1``; going
back, it receives the gradient from ``s + 1`` and sends its input's gradient to
``s - 1``. Gradients of all micro-batches accumulate, so one optimizer step sees
the same gradient as the whole batch in one process.

Two schedules decide the order in which a stage runs its forward (F) and
backward (B) passes:

* **GPipe**: every forward, then every backward (the last micro-batch first);
  each stage holds the activations of all ``m`` micro-batches at the peak;
* **1F1B**: a few forwards to fill the pipe, then one forward and one backward
  in turn; a stage holds at most ``p - s`` micro-batches.

Both leave the same idle "bubble" at the start and end of the step, a fraction
``(p - 1) / (m + p - 1)`` of it (``cl.models.pipeline.bubble_fraction``).

The stages here are tiny, so each pass pads itself to a fixed duration with a
sleep: the sleep stands for the compute time of a stage of a given size (a
forward pass of ``fwd_s`` seconds, a backward of ``bwd_s``), during which the
rank does nothing else, as a CPU does while its GPU runs a kernel. The sleeps
are built in; when each pass may start is not: a rank starts a pass only when
its ``recv`` has returned, and every rank stamps how long it waited there
(``waits``), so the bubble is measured, not assumed. ``dependencies=False``
drops the messages (and with them the right gradients) to show that the
sleeps alone leave no bubble.

Run it from a shell (four ranks, 1F1B)::

    torchrun --nproc-per-node 4 -m clusterlab.pipeline.ranks
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch
import torch.distributed as dist
from torch import nn

from clusterlab.core.validate import check_choice, check_float, check_int

PIPELINE_SCHEDULE_NAMES = ("gpipe", "1f1b")


def stage_schedule(
    schedule: str, stages: int, microbatches: int, stage: int
) -> list[tuple[str, int]]:
    """The order of passes one stage runs: a list of ``("fwd"|"bwd", micro-batch)``.

    Args:
        schedule: ``"gpipe"`` or ``"1f1b"``.
        stages: pipeline stages p, >= 1.
        microbatches: micro-batches per step m, >= 1.
        stage: this stage's index, in [0, p - 1].

    Returns:
        2m passes: each micro-batch's forward and, later, its backward.
    """
    check_choice("schedule", schedule, PIPELINE_SCHEDULE_NAMES)
    p = check_int("stages", stages, 1)
    m = check_int("microbatches", microbatches, 1)
    s = check_int("stage", stage, 0, p - 1)
    if schedule == "gpipe":
        # Backward from the last micro-batch: its forward finished last, so the
        # last stage can turn around at once.
        return [("fwd", i) for i in range(m)] + [("bwd", i) for i in reversed(range(m))]
    # 1F1B: stage s runs p - s - 1 forwards to fill the pipe, then alternates;
    # a micro-batch's activations are freed as soon as its backward is done.
    warmup = min(p - s - 1, m)
    ops = [("fwd", i) for i in range(warmup)]
    for i in range(m - warmup):
        ops += [("fwd", warmup + i), ("bwd", i)]
    return ops + [("bwd", i) for i in range(m - warmup, m)]


def make_pipeline_model(stages: int, width: int, seed: int = 0) -> nn.Sequential:
    """The single-process model: ``stages`` blocks of Linear(width, width) → tanh.

    Args:
        stages: number of blocks (one per pipeline stage), >= 1.
        width: features in and out of every block, >= 1.
        seed: every rank builds the same weights from it.
    """
    check_int("stages", stages, 1)
    check_int("width", width, 1)
    gen = torch.Generator().manual_seed(seed)
    blocks = []
    for _ in range(stages):
        layer = nn.Linear(width, width)
        with torch.no_grad():
            layer.weight.copy_(torch.randn(width, width, generator=gen) / width**0.5)
            layer.bias.copy_(torch.randn(width, generator=gen) * 0.1)
        blocks.append(nn.Sequential(layer, nn.Tanh()))
    return nn.Sequential(*blocks)


def pipeline_batch(batch: int, width: int, seed: int = 0):
    """The batch every rank agrees on: inputs and targets, each (batch, width)."""
    gen = torch.Generator().manual_seed(seed + 1)
    return torch.randn(batch, width, generator=gen), torch.randn(
        batch, width, generator=gen
    )


def _loss(out: torch.Tensor, target: torch.Tensor, batch: int) -> torch.Tensor:
    # Summed over a micro-batch and divided by the whole batch, so that the
    # micro-batches' losses (and gradients) add up to the whole batch's.
    return (out - target).pow(2).sum() / batch


def pipeline_reference_grads(stages: int, width: int, batch: int, seed: int = 0):
    """Gradients of the whole model on the whole batch, in one process.

    Returns:
        A list with one entry per stage: ``[weight_grad, bias_grad]``.
    """
    model = make_pipeline_model(stages, width, seed)
    x, target = pipeline_batch(batch, width, seed)
    _loss(model(x), target, batch).backward()
    return [[p.grad.clone() for p in block.parameters()] for block in model]


def _pad_to(t0: float, duration_s: float) -> None:
    # The stand-in for a larger layer's arithmetic: the pass lasts duration_s.
    left = duration_s - (time.time() - t0)
    if left > 0:
        time.sleep(left)


def pipeline_worker(
    rank,
    world_size,
    schedule="1f1b",
    microbatches=8,
    batch=32,
    width=16,
    fwd_s=0.01,
    bwd_s=0.02,
    seed=0,
    dependencies=True,
):
    """One pipeline stage: run its schedule over send/recv; time every pass.

    Args:
        rank: this stage's index; world_size: the number of stages p.
        schedule: ``"gpipe"`` or ``"1f1b"``.
        microbatches: m, which must divide ``batch``; or a tuple of such m,
            run one step after another in one launch (launching costs more
            than a step).
        batch: samples per step; width: features per sample.
        fwd_s, bwd_s: seconds each forward and backward pass is padded to.
        seed: the model's and the batch's seed.
        dependencies: False runs the same passes with no messages (inputs and
            gradients are zeros): a control that shows what the sleeps alone do.

    Returns:
        A dict (a list of dicts, one per m, for a tuple): ``grads``
        (``[weight_grad, bias_grad]`` of this stage), ``events`` (``(phase,
        micro-batch, start_s, end_s)`` on the wall clock of this machine),
        ``waits`` (``(phase, micro-batch, start_s, end_s)`` spent blocked in
        ``recv`` before that pass), ``peak_in_flight`` (most micro-batches
        whose activations this stage held at once) and ``loss`` (last stage).
    """
    sweep = isinstance(microbatches, (tuple, list))
    ms = [check_int("microbatches", m, 1, batch) for m in np.atleast_1d(microbatches)]
    check_float("fwd_s", fwd_s, 0.0)
    check_float("bwd_s", bwd_s, 0.0)
    for m in ms:
        if batch % m:
            raise ValueError(f"microbatches={m} must divide batch={batch}")
    device = torch.device("cpu")
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", rank)
    stage = make_pipeline_model(world_size, width, seed)[rank].to(device)
    x, target = (t.to(device) for t in pipeline_batch(batch, width, seed))
    # One untimed micro-batch first: it pays the one-time costs (autograd's
    # threads, the first message on each link) that are no part of a schedule.
    _run_schedule(stage, x[:1], target[:1], "gpipe", 1, 1, 0.0, 0.0)
    out, timing = [], (fwd_s, bwd_s, bool(dependencies))
    for m in ms:
        stage.zero_grad()
        dist.barrier()  # start together, so the timeline shows only the schedule
        run = _run_schedule(stage, x, target, schedule, m, batch, *timing)
        out.append({"grads": [p.grad.cpu() for p in stage.parameters()], **run})
    return out if sweep else out[0]


def _recv(buf, src, waits, phase, i):
    # The wait is the part of the bubble a rank sees: blocked until its input.
    w0 = time.time()
    dist.recv(buf, src=src)
    waits.append((phase, i, w0, time.time()))


def _run_schedule(
    stage, x, target, schedule, microbatches, batch, fwd_s, bwd_s, deps=True
):
    """Run one step of ``schedule`` on this rank's stage; return what was timed."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    first, last = rank == 0, rank == world_size - 1
    xs, targets = x.chunk(microbatches), target.chunk(microbatches)
    mb_shape = (x.shape[0] // microbatches, x.shape[1])
    stash, sends, events, waits, peak, loss_sum = {}, [], [], [], 0, 0.0
    for phase, i in stage_schedule(schedule, world_size, microbatches, rank):
        if phase == "fwd":
            if first:
                inp = xs[i]
            else:
                inp = torch.zeros(mb_shape, device=x.device)
                if deps:
                    _recv(inp, rank - 1, waits, phase, i)
                inp.requires_grad_()
            t0 = time.time()
            out = stage(inp)
            if last:
                out = _loss(out, targets[i], batch)
                loss_sum += out.item()
            _pad_to(t0, fwd_s)
            if not last and deps:
                sends.append(dist.isend(out.detach(), dst=rank + 1))
            stash[i] = (inp, out)
            peak = max(peak, len(stash))
        else:
            inp, out = stash.pop(i)
            grad = None
            if not last:
                grad = torch.zeros_like(out)
                if deps:
                    _recv(grad, rank + 1, waits, phase, i)
            t0 = time.time()
            out.backward(grad)
            _pad_to(t0, bwd_s)
            if not first and deps:
                sends.append(dist.isend(inp.grad, dst=rank - 1))
        events.append((phase, i, t0, time.time()))
    for handle in sends:
        handle.wait()
    return {
        "events": events,
        "waits": waits,
        "peak_in_flight": peak,
        "loss": loss_sum if last else None,
    }


_COLUMNS = ["stage", "chunk", "microbatch", "phase", "start", "end"]


def _table(results: list, key: str) -> pd.DataFrame:
    rows = [
        (stage, 0, mb, phase, t0, t1)
        for stage, res in enumerate(results)
        for phase, mb, t0, t1 in res[key]
    ]
    return pd.DataFrame(rows, columns=_COLUMNS)


def _t_zero(results: list) -> float:
    # All ranks read one machine's clock; across machines this subtraction
    # would need synchronised clocks (Part I, time and order).
    return min(t0 for res in results for _, _, t0, _ in res["events"])


def pipeline_timeline(results: list) -> pd.DataFrame:
    """The ranks' timed passes as one table, in seconds from the first start.

    Args:
        results: what ``cl.launch(pipeline_worker, p, ...)`` returned.

    Returns:
        DataFrame with the columns of ``cl.models.pipeline.simulate_schedule``:
        ``stage, chunk, microbatch, phase, start, end`` (seconds), so the same
        charts and ``simulated_bubble`` apply to a measured run.
    """
    df = _table(results, "events")
    df[["start", "end"]] -= _t_zero(results)
    return df.sort_values(["stage", "start"], ignore_index=True)


def pipeline_waits(results: list) -> pd.DataFrame:
    """The time each rank spent blocked in ``recv``, on the timeline's clock.

    Args:
        results: what ``cl.launch(pipeline_worker, p, ...)`` returned.

    Returns:
        The columns of :func:`pipeline_timeline`, ``phase`` being the pass that
        waited; waits are clipped to start at 0 (the first pass's start), so
        the time before the step is not counted.
    """
    df = _table(results, "waits")
    df[["start", "end"]] = (df[["start", "end"]] - _t_zero(results)).clip(lower=0.0)
    return df.sort_values(["stage", "start"], ignore_index=True)


def _main() -> None:  # pragma: no cover - run under torchrun
    import os

    from clusterlab.core.backend import choose_backend
    from clusterlab.models.pipeline import bubble_fraction, simulated_bubble

    world_size = int(os.environ["WORLD_SIZE"])
    rank = int(os.environ["RANK"])
    dist.init_process_group(choose_backend(world_size))
    try:
        res = pipeline_worker(rank, world_size)
        gathered = [None] * world_size
        dist.all_gather_object(gathered, res)
        if rank == 0:
            idle = simulated_bubble(pipeline_timeline(gathered))
            model = bubble_fraction(world_size, 8)
            print(f"1F1B, {world_size} stages, 8 micro-batches: idle {idle:.1%}")
            print(f"model (p - 1) / (m + p - 1) = {model:.1%}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":  # pragma: no cover
    _main()


__all__ = [
    "PIPELINE_SCHEDULE_NAMES",
    "make_pipeline_model",
    "pipeline_batch",
    "pipeline_reference_grads",
    "pipeline_timeline",
    "pipeline_waits",
    "pipeline_worker",
    "stage_schedule",
]
