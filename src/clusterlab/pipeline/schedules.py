"""Interleaved and zero-bubble pipeline schedules, run by PyTorch's own pipelining.

The hand-written pipeline (``cl.pipeline.ranks``) gives each rank one stage. Here
PyTorch's own schedules run the same blocks (Linear → tanh) on real ranks:

* ``"1f1b"`` (``Schedule1F1B``): one stage of two blocks per rank;
* ``"interleaved_1f1b"`` (``ScheduleInterleaved1F1B``, Narayanan et al. 2021):
  two one-block stages per rank in a loop, rank r holding stages r and r + W;
* ``"interleaved_zb"`` (``ScheduleInterleavedZeroBubble``, the ZB-H1 schedule
  of Qi et al. 2024): the same layout, with each backward pass split into B
  (the input's gradient, which the previous stage waits for) and W (the
  weights' gradient, which nobody waits for and so fills the bubble);
* ``"zbv"`` (``ScheduleZBVZeroBubble``): the split backward with the V layout,
  rank r holding stages r and 2W - 1 - r, so rank 0 holds the first and the
  last stage and turns the pipe round itself.

Every pass is padded with sleeps that stand for a larger stage's compute: the
forward ``f_s``, the input-gradient part ``b_s`` and the weight-gradient part
``w_s`` of each block. The sleeps sit in the autograd graph, so a split
backward pays ``b_s`` in B and ``w_s`` in W, and a full backward pays both.
Each sleep stamps its start and end, so a step's bubble and the activations a
rank holds are measured from what the schedule ran.

Run it from a shell (two ranks, every schedule)::

    torchrun --nproc-per-node 2 -m clusterlab.pipeline.schedules
"""

from __future__ import annotations

import time

import pandas as pd
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed import pipelining

from clusterlab.core.validate import check_choice, check_float, check_int
from clusterlab.models.pipeline_schedules import parse_actions
from clusterlab.pipeline.ranks import (
    make_pipeline_model,
    pipeline_batch,
    stage_schedule,
)

#: Schedule name -> (torch class name, stages per rank, layout).
PIPELINING_SCHEDULES = {
    "1f1b": ("Schedule1F1B", 1, "loop"),
    "interleaved_1f1b": ("ScheduleInterleaved1F1B", 2, "loop"),
    "interleaved_zb": ("ScheduleInterleavedZeroBubble", 2, "loop"),
    "zbv": ("ScheduleZBVZeroBubble", 2, "v"),
}


def stage_layout(schedule: str, rank: int, world_size: int) -> list[int]:
    """The stages (of ``2 * world_size`` one-block stages) a rank holds.

    Args:
        schedule: a name of ``PIPELINING_SCHEDULES``.
        rank: this rank, in [0, world_size - 1]; world_size: ranks W, >= 2.

    Returns:
        Block indices: ``[2r, 2r + 1]`` as one stage for ``"1f1b"``;
        ``[r, r + W]`` for the loop layout; ``[r, 2W - 1 - r]`` for the V.
    """
    check_choice("schedule", schedule, tuple(PIPELINING_SCHEDULES))
    w = check_int("world_size", world_size, 2)
    r = check_int("rank", rank, 0, w - 1)
    _, v, layout = PIPELINING_SCHEDULES[schedule]
    if v == 1:
        return [2 * r, 2 * r + 1]
    return [r, r + w] if layout == "loop" else [r, 2 * w - 1 - r]


class _Pad(torch.autograd.Function):
    """Identity that sleeps ``fwd_s`` going forward and ``bwd_s`` going back."""

    @staticmethod
    def forward(ctx, x, fwd_s, bwd_s, log, tag):
        ctx.bwd_s, ctx.log, ctx.tag = bwd_s, log, tag
        if fwd_s:
            t0 = time.time()
            time.sleep(fwd_s)
            log.append((*tag[:2], "fwd", t0, time.time()))
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        if ctx.bwd_s:
            t0 = time.time()
            time.sleep(ctx.bwd_s)
            phase = "wgt" if ctx.tag[2] == "w" else "bwd"
            ctx.log.append((*ctx.tag[:2], phase, t0, time.time()))
        return grad, None, None, None, None


class _TimedBlock(nn.Module):
    """One block (Linear → tanh) whose passes are padded and stamped."""

    def __init__(self, block, index, rank, times, log):
        super().__init__()
        self.linear, self.times = block[0], times
        self.index, self.rank, self.log = index, rank, log

    def forward(self, x):
        (f_s, b_s, w_s), tag = self.times, (self.rank, self.index)
        x = _Pad.apply(x, f_s, 0.0, self.log, (*tag, "f"))
        # W's sleep sits on the weight's own branch, B's on the shared one.
        weight = _Pad.apply(self.linear.weight, 0.0, w_s, self.log, (*tag, "w"))
        h = F.linear(x, weight, self.linear.bias)
        return torch.tanh(_Pad.apply(h, 0.0, b_s, self.log, (*tag, "b")))


def _loss(batch):
    # Each micro-batch's squared error over the whole batch: the micro-batches'
    # losses (and gradients) add up to the single process's.
    def loss_fn(out, target):
        return (out - target).pow(2).sum() / batch

    return loss_fn


class _Stage(pipelining.PipelineStage):
    """PyTorch's stage, made to run the V schedules on torch 2.11 too.

    Before its first step a schedule warms up every stage's connections with one
    dummy send or receive to each neighbouring stage's rank. Torch 2.11 does so
    even where both neighbours are on this rank (the V's turn: with two ranks,
    stages 1 and 2 share rank 1), and gloo then fails ("Pair is not connected"):
    a rank cannot send to itself. Torch 2.12 replaced that warm-up with one that
    skips such pairs; on 2.11 this drops the rank's own pairs from it. The
    method is private to torch; where it does not exist nothing changes.
    """

    def _get_init_p2p_neighbors_ops(self):
        ops = super()._get_init_p2p_neighbors_ops()
        return [op for op in ops if getattr(op, "group_peer", None) != self.group_rank]


def _run_one(schedule, rank, w, m, batch, width, times, seed, device):
    cls_name, v, _ = PIPELINING_SCHEDULES[schedule]
    blocks = make_pipeline_model(2 * w, width, seed)
    log = []
    timed = [_TimedBlock(blocks[i], i, rank, times, log) for i in range(2 * w)]
    ids = stage_layout(schedule, rank, w)
    groups = [ids] if v == 1 else [[i] for i in ids]
    stages = [
        _Stage(
            nn.Sequential(*(timed[i] for i in g)).to(device),
            g[0] // (2 // v),  # the stage's index among all stages
            2 * w // (2 // v),
            device,
        )
        for g in groups
    ]
    cls = getattr(pipelining, cls_name)
    sched = cls(stages[0] if v == 1 else stages, m, _loss(batch), scale_grads=False)
    x, target = (t.to(device) for t in pipeline_batch(batch, width, seed))
    args = (x,) if 0 in ids else ()
    kw = {"target": target} if 2 * w - 1 in ids else {}
    for pad in ((0.0, 0.0, 0.0), times):  # an unpadded step pays one-time costs
        for block in timed:
            block.times = pad
        for s in stages:
            s.submod.zero_grad(set_to_none=True)
        log.clear()
        dist.barrier()
        t0 = time.time()
        sched.step(*args, **kw)
        step_s = time.time() - t0
    grads = {i: [p.grad.cpu() for p in timed[i].linear.parameters()] for i in ids}
    return {
        "schedule": schedule,
        "grads": grads,
        "events": list(log),
        "step_s": step_s,
        "order": _order(sched, schedule, rank, w, m),
    }


def _order(sched, schedule, rank, w, m):
    # Torch's own action list where it keeps one; 1F1B's is the hand-written one.
    if schedule == "1f1b":
        kind = {"fwd": "F", "bwd": "B"}
        return [(rank, kind[ph], i) for ph, i in stage_schedule("1f1b", w, m, rank)]
    acts = [a for a in sched.pipeline_order[rank] if a is not None]
    return parse_actions(acts)


def schedules_worker(
    rank,
    world_size,
    schedules=tuple(PIPELINING_SCHEDULES),
    microbatches=4,
    batch=16,
    width=8,
    f_s=0.01,
    b_s=0.01,
    w_s=0.01,
    seed=0,
):
    """Run one step of each schedule on this rank; time every padded pass.

    Args:
        rank, world_size: this rank and the ranks W (>= 2); the model has
            ``2W`` blocks (``cl.pipeline.ranks.make_pipeline_model``).
        schedules: names of ``PIPELINING_SCHEDULES``, run one after another.
        microbatches: m, which must divide ``batch``; batch, width: the data.
        f_s, b_s, w_s: seconds each block's forward, input-gradient and
            weight-gradient passes are padded with.
        seed: the model's and the batch's seed.

    Returns:
        A list, one dict per schedule: ``schedule``, ``grads`` (block index ->
        ``[weight_grad, bias_grad]``), ``events`` (``(rank, block, phase,
        start_s, end_s)``, phase "fwd", "bwd" or "wgt"), ``step_s`` and
        ``order`` (this rank's ``(stage, kind, micro-batch)`` actions, as
        ``cl.models.pipeline_schedules.play_actions`` takes them).
    """
    for s in schedules:
        check_choice("schedules", s, tuple(PIPELINING_SCHEDULES))
    m = check_int("microbatches", microbatches, 1, batch)
    if batch % m:
        raise ValueError(f"microbatches={m} must divide batch={batch}")
    times = tuple(check_float(n, t, 0.0) for n, t in (("f_s", f_s), ("b_s", b_s),
                                                      ("w_s", w_s)))  # fmt: skip
    device = torch.device("cpu")
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", rank)
    return [
        _run_one(s, rank, world_size, m, batch, width, times, seed, device)
        for s in schedules
    ]


def schedule_timeline(results: list, schedule: str) -> pd.DataFrame:
    """One schedule's stamped passes on all ranks, in seconds from the first.

    Args:
        results: what ``cl.launch(schedules_worker, W, ...)`` returned.
        schedule: which schedule's step.

    Returns:
        DataFrame ``stage`` (the rank, one row of a Gantt chart), ``chunk`` (the
        block), ``phase`` ("fwd", "bwd", "wgt"), ``start``, ``end`` (seconds).
    """
    rows = [
        ev
        for per_rank in results
        for res in per_rank
        if res["schedule"] == schedule
        for ev in res["events"]
    ]
    if not rows:
        raise ValueError(f"schedule={schedule!r} is not in these results")
    df = pd.DataFrame(rows, columns=["stage", "chunk", "phase", "start", "end"])
    t0 = df["start"].min()
    df[["start", "end"]] -= t0
    return df.sort_values(["stage", "start"], ignore_index=True)


def compare_schedules(results: list, f_s: float, b_s: float, w_s: float):
    """Each schedule's measured bubble and held activations beside its prediction.

    The prediction plays each rank's own list of actions out with the padded
    pass times and no message time
    (``cl.models.pipeline_schedules.play_actions``).

    Args:
        results: what ``cl.launch(schedules_worker, W, ...)`` returned.
        f_s, b_s, w_s: the pass times the run was padded with (per block).

    Returns:
        DataFrame, one row per schedule: ``schedule, chunks_per_rank,
        measured, predicted`` (idle share of the step), ``held_measured``,
        ``held_predicted`` (most micro-batches' activations a rank held, rank 0
        and the largest over ranks agree here) and ``step_s``.
    """
    from clusterlab.models.pipeline import simulated_bubble
    from clusterlab.models.pipeline_schedules import held_activations, play_actions

    rows = []
    for k, res in enumerate(results[0]):
        name = res["schedule"]
        v = PIPELINING_SCHEDULES[name][1]
        orders = {r: per_rank[k]["order"] for r, per_rank in enumerate(results)}
        # A one-stage-per-rank schedule's stage holds both of the rank's blocks.
        sim = play_actions(orders, 2 * f_s / v, 2 * b_s / v, 2 * w_s / v)
        timeline = schedule_timeline(results, name)
        rows.append(
            {
                "schedule": name,
                "chunks_per_rank": v,
                "measured": simulated_bubble(timeline),
                "predicted": simulated_bubble(sim),
                "held_measured": held_activations(timeline).max(),
                "held_predicted": held_activations(sim).max(),
                "step_s": max(per_rank[k]["step_s"] for per_rank in results),
            }
        )
    return pd.DataFrame(rows)


def _main() -> None:  # pragma: no cover - run under torchrun
    import os

    from clusterlab.core.backend import choose_backend
    from clusterlab.models.pipeline import simulated_bubble

    world_size = int(os.environ["WORLD_SIZE"])
    dist.init_process_group(choose_backend(world_size))
    try:
        res = schedules_worker(int(os.environ["RANK"]), world_size)
        gathered = [None] * world_size
        dist.all_gather_object(gathered, res)
        if dist.get_rank() == 0:
            for name in PIPELINING_SCHEDULES:
                idle = simulated_bubble(schedule_timeline(gathered, name))
                print(f"{name}: idle {idle:.1%} of the step")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":  # pragma: no cover
    _main()


__all__ = [
    "PIPELINING_SCHEDULES",
    "compare_schedules",
    "schedule_timeline",
    "schedules_worker",
    "stage_layout",
]
