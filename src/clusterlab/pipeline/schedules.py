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
Each block has pads of its own, so the last block (in a language model the one
that also holds the head and the loss) can be heavier. Each sleep stamps its
start and end, so a step's bubble and the activations a rank holds are
measured from what the schedule ran.

The prediction they are compared with (:func:`predict_schedules`,
:func:`compare_schedules`) comes from each schedule's published rule and the
pads alone (``cl.models.pipeline_orders``), never from the run; how late each
pass started (:func:`pass_delays`) sets how much idle time the run's own noise
may add.

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

#: Schedule name -> (torch class name, stages per rank, layout, the rule that
#: ``cl.models.pipeline_orders`` predicts it with).
PIPELINING_SCHEDULES = {
    "1f1b": ("Schedule1F1B", 1, "loop", "1f1b"),
    "interleaved_1f1b": ("ScheduleInterleaved1F1B", 2, "loop", "1f1b"),
    "interleaved_zb": ("ScheduleInterleavedZeroBubble", 2, "loop", "zb_h1"),
    "zbv": ("ScheduleZBVZeroBubble", 2, "v", "zbv"),
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
    _, v, layout, _ = PIPELINING_SCHEDULES[schedule]
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
    cls_name, v, _, _ = PIPELINING_SCHEDULES[schedule]
    blocks = make_pipeline_model(2 * w, width, seed)
    log = []
    timed = [_TimedBlock(blocks[i], i, rank, times[i], log) for i in range(2 * w)]
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
    for padded in (False, True):  # an unpadded step pays one-time costs
        for block, pad in zip(timed, times, strict=True):
            block.times = pad if padded else (0.0, 0.0, 0.0)
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
    # Torch's own action list, for comparing with the rule (never to predict);
    # Schedule1F1B keeps none, so 1F1B's is the hand-written one.
    if schedule == "1f1b":
        kind = {"fwd": "F", "bwd": "B"}
        return [(rank, kind[ph], i) for ph, i in stage_schedule("1f1b", w, m, rank)]
    acts = [a for a in sched.pipeline_order[rank] if a is not None]
    return parse_actions(acts)


def block_pads(blocks: int, f_s, b_s, w_s) -> list[tuple[float, float, float]]:
    """Each block's ``(f_s, b_s, w_s)`` pads from one number or one per block.

    Args:
        blocks: how many blocks the model has, >= 1.
        f_s, b_s, w_s: seconds of each block's forward, input-gradient and
            weight-gradient pad, >= 0: one number for every block or a list
            with one per block.

    Returns:
        One ``(f_s, b_s, w_s)`` per block.
    """
    n = check_int("blocks", blocks, 1)
    cols = []
    for name, value in (("f_s", f_s), ("b_s", b_s), ("w_s", w_s)):
        values = list(value) if isinstance(value, list | tuple) else [value] * n
        if len(values) != n:
            raise ValueError(f"{name} has {len(values)} pads: give one per block, {n}")
        cols.append([check_float(f"{name}[{i}]", t, 0.0) for i, t in enumerate(values)])
    return list(zip(*cols, strict=True))


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
            weight-gradient passes are padded with, >= 0: one number for
            every block, or a list with one per block (:func:`block_pads`).
        seed: the model's and the batch's seed.

    Returns:
        A list, one dict per schedule: ``schedule``, ``grads`` (block index ->
        ``[weight_grad, bias_grad]``), ``events`` (``(rank, block, phase,
        start_s, end_s)``, phase "fwd", "bwd" or "wgt"), ``step_s`` and
        ``order`` (this rank's ``(stage, kind, micro-batch)`` actions as torch
        lists them, kept to compare with the rule's order; no prediction
        reads it).
    """
    for s in schedules:
        check_choice("schedules", s, tuple(PIPELINING_SCHEDULES))
    m = check_int("microbatches", microbatches, 1, batch)
    if batch % m:
        raise ValueError(f"microbatches={m} must divide batch={batch}")
    times = block_pads(2 * world_size, f_s, b_s, w_s)
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


def stage_pads(schedule: str, world_size: int, f_s, b_s, w_s):
    """Each pipeline stage's padded F, B and W seconds, summed over its blocks.

    Args:
        schedule: a name of ``PIPELINING_SCHEDULES``.
        world_size: ranks W, >= 2.
        f_s, b_s, w_s: the run's pads, one number or one per block
            (:func:`block_pads`).

    Returns:
        ``(fwd_s, bwd_s, wgt_s)``, each a list with one time per stage in
        model order: stage ``r`` of ``"1f1b"`` holds blocks ``2r`` and
        ``2r + 1``; every other schedule's stage ``s`` is block ``s``.
    """
    check_choice("schedule", schedule, tuple(PIPELINING_SCHEDULES))
    w = check_int("world_size", world_size, 2)
    pads = block_pads(2 * w, f_s, b_s, w_s)
    per = 2 // PIPELINING_SCHEDULES[schedule][1]  # blocks per stage
    return tuple(
        [sum(pads[s * per + j][k] for j in range(per)) for s in range(2 * w // per)]
        for k in range(3)
    )


def schedule_actions(results: list, schedule: str, f_s, b_s, w_s) -> pd.DataFrame:
    """A measured step as the model's passes: one row per stage, kind and micro-batch.

    The stamps are per block and per pad; here they are merged into the passes
    the schedule runs: a forward of a two-block stage is both blocks' forward
    pads, a whole backward ("B", in 1F1B) is the input- and weight-gradient
    pads together. A stage runs its micro-batches' forwards, input gradients
    and weight gradients each in order, so the k-th of a kind is micro-batch k.

    Args:
        results: what ``cl.launch(schedules_worker, W, ...)`` returned.
        schedule: which schedule's step.
        f_s, b_s, w_s: the pads the run used (:func:`block_pads`).

    Returns:
        The columns of ``cl.models.pipeline_schedules.play_actions`` (``stage``
        is the rank, ``chunk`` the pipeline stage), plus ``kind`` ("F", "B",
        "I", "W") and ``pad_s``, the seconds of padding the pass holds.
    """
    from clusterlab.models.pipeline_orders import stage_ranks

    _, v, _, rule = PIPELINING_SCHEDULES[schedule]
    w = len(results)
    pads = block_pads(2 * w, f_s, b_s, w_s)
    ev = schedule_timeline(results, schedule)
    ev["pad_s"] = [pads[c][("fwd", "bwd", "wgt").index(ph)]
                   for c, ph in zip(ev.chunk, ev.phase, strict=True)]  # fmt: skip
    # Each block stamps each kind of pad once per micro-batch, in order.
    ev = ev.sort_values("start", kind="stable")
    ev["microbatch"] = ev.groupby(["chunk", "phase"]).cumcount()
    ev["chunk"] = ev["chunk"] // (2 // v)  # the block's stage
    ev["kind"] = ev["phase"].map({"fwd": "F", "bwd": "I", "wgt": "W"})
    if rule == "1f1b":  # no split: a backward is both pads
        ev["kind"] = ev["kind"].replace({"I": "B", "W": "B"})
    keys = ["stage", "chunk", "kind"]
    acts = ev.groupby([*keys, "microbatch"], as_index=False).agg(
        start=("start", "min"), end=("end", "max"), pad_s=("pad_s", "sum")
    )
    owner = stage_ranks(rule, w, v)
    if (acts["stage"] != acts["chunk"].map(lambda s: owner[s])).any():
        raise ValueError(f"schedule={schedule!r}: a stage ran on the wrong rank")
    acts["phase"] = acts["kind"].map({"F": "fwd", "B": "bwd", "I": "bwd", "W": "wgt"})
    cols = ["stage", "chunk", "microbatch", "phase", "start", "end", "kind", "pad_s"]
    return acts[cols].sort_values(["stage", "start"], ignore_index=True)


def pass_delays(actions: pd.DataFrame) -> pd.Series:
    """Seconds each pass of a measured step lost beyond its padding.

    A pass could start once its rank's previous pass had ended and its input
    was there (the previous stage's forward, the next stage's input gradient,
    its own input gradient for a W). What it took beyond that and its pads is
    noise: the message, waking up, torch's runtime, a sleep that overran.

    Args:
        actions: :func:`schedule_actions` of one step.

    Returns:
        One value per pass (index as ``actions``), >= 0 up to the clock's
        resolution, named ``lost_s``; a rank's first pass with no input to
        wait for has none.
    """
    last = int(actions["chunk"].max())
    end = {}
    for r in actions.itertuples():
        end[("I" if r.kind == "B" else r.kind, r.chunk, r.microbatch)] = r.end
    lost = {}
    for _, g in actions.sort_values("start").groupby("stage"):
        prev = None
        for r in g.itertuples():
            if r.kind == "F":
                dep = ("F", r.chunk - 1, r.microbatch) if r.chunk else None
            elif r.kind == "W":
                dep = ("I", r.chunk, r.microbatch)
            elif r.chunk < last:
                dep = ("I", r.chunk + 1, r.microbatch)
            else:
                dep = ("F", r.chunk, r.microbatch)
            ready = [t for t in (prev, end.get(dep)) if t is not None]
            if ready:
                lost[r.Index] = r.end - max(ready) - r.pad_s
            prev = r.end
    return pd.Series(lost, name="lost_s").sort_index()


def _pads_given(world_size, f_s, b_s, w_s):
    pads = block_pads(2 * world_size, f_s, b_s, w_s)
    for i, (f, b, w) in enumerate(pads):
        if min(f, b, w) <= 0:
            raise ValueError(
                f"block {i}'s pads (f_s, b_s, w_s) = {(f, b, w)} must all be > 0: "
                "a pass of 0 s leaves no stamp to measure"
            )
    return pads


def predict_schedules(
    world_size: int,
    microbatches: int,
    f_s,
    b_s,
    w_s,
    model=None,
    delay_s=0.0,
) -> pd.DataFrame:
    """Each schedule's bubble, held activations and step, from its rule alone.

    Nothing of a run goes in, only its shape and pads: the prediction can be
    stated before the run.

    Args:
        world_size: ranks W, >= 2 (the model has ``2W`` blocks).
        microbatches: m, >= 1 (a multiple of W for the interleaved ones).
        f_s, b_s, w_s: each block's pads, > 0, one number or one per block.
        model: ``model(rule, ranks, microbatches, *, chunks, fwd_s, bwd_s,
            wgt_s, delay_s)`` returning a timeline with ``play_actions``'s
            columns, times per stage in model order; by default
            ``cl.models.pipeline_orders.play_schedule``.
        delay_s: seconds each pass starts late, >= 0: one number, or a dict
            schedule -> seconds (a number, or a dict pass kind -> seconds as
            ``play_actions`` takes it).

    Returns:
        One row per schedule of ``PIPELINING_SCHEDULES``: ``schedule, rule,
        chunks_per_rank, predicted`` (idle share of the step),
        ``held_predicted`` (most micro-batches' activations a rank holds) and
        ``step_predicted_s``.
    """
    from clusterlab.models.pipeline import simulated_bubble
    from clusterlab.models.pipeline_orders import play_schedule
    from clusterlab.models.pipeline_schedules import held_activations

    w = check_int("world_size", world_size, 2)
    m = check_int("microbatches", microbatches, 1)
    _pads_given(w, f_s, b_s, w_s)
    model = play_schedule if model is None else model
    rows = []
    for name, (_, v, _, rule) in PIPELINING_SCHEDULES.items():
        delay = delay_s.get(name, 0.0) if isinstance(delay_s, dict) else delay_s
        fwd, bwd, wgt = stage_pads(name, w, f_s, b_s, w_s)
        sim = model(rule, w, m, chunks=v, fwd_s=fwd, bwd_s=bwd, wgt_s=wgt,
                    delay_s=delay)  # fmt: skip
        rows.append(
            dict(
                schedule=name, rule=rule, chunks_per_rank=v,
                predicted=simulated_bubble(sim),
                held_predicted=held_activations(sim).max(),
                step_predicted_s=sim["end"].max() - sim["start"].min(),
            )
        )  # fmt: skip
    return pd.DataFrame(rows)


def compare_schedules(
    results: list,
    f_s,
    b_s,
    w_s,
    model=None,
    quantile: float = 0.9,
) -> pd.DataFrame:
    """Each schedule's measured bubble and held activations beside a model's.

    ``measured`` counts the pads as the busy time, ``1 - pads / (ranks *
    step)``, so noise (a late message, torch's runtime, a sleep that overran)
    can only add idle time. Two columns say how finely this run can judge,
    whatever model is judged, both from the book's rules
    (``cl.models.pipeline_orders.play_schedule``):

    * ``allowance``: the idle share this run's own noise explains, the rules
      played again with every pass starting late by the ``quantile`` of what
      the run's passes of its kind lost (:func:`pass_delays`; a backward
      loses more than a forward to autograd's bookkeeping), ``delay_s``
      (kind -> seconds);
    * ``gap``: how far the schedule's predicted bubble lies from the nearest
      other schedule's (``nearest``); a check whose band is not narrower
      cannot tell them apart (``cl.models.pipeline_orders.bubble_gaps``).

    Args:
        results: what ``cl.launch(schedules_worker, W, ...)`` returned, every
            schedule of ``PIPELINING_SCHEDULES``.
        f_s, b_s, w_s: the pads the run used, > 0, one number or one per block.
        model: the model to compare with (see :func:`predict_schedules`); by
            default the book's rules.
        quantile: which quantile of the passes' lost time sets the allowance,
            in [0.5, 1].

    Returns:
        :func:`predict_schedules`'s table with ``measured``, ``allowance``,
        ``delay_s``, ``gap``, ``nearest``, ``held_measured`` and ``step_s``
        (measured).
    """
    from clusterlab.models.pipeline_orders import bubble_gaps
    from clusterlab.models.pipeline_schedules import held_activations

    q = check_float("quantile", quantile, 0.5, 1.0)
    w = len(results)
    _pads_given(w, f_s, b_s, w_s)
    names = [res["schedule"] for res in results[0]]
    if sorted(names) != sorted(PIPELINING_SCHEDULES):
        raise ValueError(f"results hold {names}: run every schedule to compare them")
    measured, delay = {}, {}
    for name in names:
        acts = schedule_actions(results, name, f_s, b_s, w_s)
        step = acts["end"].max() - acts["start"].min()
        measured[name] = dict(
            measured=1.0 - acts["pad_s"].sum() / (w * step),
            held_measured=held_activations(acts).max(),
            step_s=step,
        )
        lost = pass_delays(acts).clip(lower=0.0)
        kinds = acts.loc[lost.index, "kind"]
        delay[name] = {
            k: float(lost[kinds == k].quantile(q)) for k in sorted(set(kinds))
        }
    m = int(acts["microbatch"].max()) + 1
    rules = predict_schedules(w, m, f_s, b_s, w_s)
    noisy = predict_schedules(w, m, f_s, b_s, w_s, delay_s=delay)
    table = predict_schedules(w, m, f_s, b_s, w_s, model=model)
    table = table.join(pd.DataFrame.from_dict(measured, orient="index"), "schedule")
    table["allowance"] = (noisy["predicted"] - rules["predicted"]).clip(lower=0.0)
    table["delay_s"] = table["schedule"].map(delay)
    gaps = bubble_gaps(rules.set_index("schedule")["predicted"])
    return table.join(gaps, "schedule")


def _main() -> None:  # pragma: no cover - run under torchrun
    import os

    from clusterlab.core.backend import choose_backend

    world_size = int(os.environ["WORLD_SIZE"])
    dist.init_process_group(choose_backend(world_size))
    try:
        pads = {"f_s": 0.02, "b_s": 0.04, "w_s": 0.02}
        res = schedules_worker(int(os.environ["RANK"]), world_size, **pads)
        gathered = [None] * world_size
        dist.all_gather_object(gathered, res)
        if dist.get_rank() == 0:
            table = compare_schedules(gathered, **pads)
            for row in table.itertuples():
                print(
                    f"{row.schedule}: idle {row.measured:.1%} of the step, "
                    f"{row.predicted:.1%} predicted by its rule"
                )
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":  # pragma: no cover
    _main()


__all__ = [
    "PIPELINING_SCHEDULES",
    "block_pads",
    "compare_schedules",
    "pass_delays",
    "predict_schedules",
    "schedule_actions",
    "schedule_timeline",
    "schedules_worker",
    "stage_layout",
    "stage_pads",
]
