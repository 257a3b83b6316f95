"""Checks of data parallelism: the exercises, and the step's measured communication.

``average_gradients`` and ``fsdp_bytes_per_rank`` check exercises.
``comm_prediction`` checks the alpha–beta model of the per-tensor all-reduces
against their time in real training steps, and ``step_parts`` checks what the
data-parallel lab reads off its chart; both take measurements, so a wrong model
or a wrong measurement fails them.

The bound of ``comm_prediction`` comes from repeated runs on a shared two-core
machine (load 3-9 from other programs), alone and beside two busy loops (load
10-16). The fastest step's all-reduces took 0.97-1.7 times the model's time
alone and 0.57-8.5 times beside the loops, where one try in five missed; so
``COMM_RATIO_BOUNDS`` allows 0.4-3 and a miss is measured again. A model
without alpha predicts 3-6 times less here, and lands at 3.3-14 alone; beside
the busy loops it can land inside the bound (1.1 once), so on a machine that
busy only a quiet rerun tells a missing alpha apart.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from clusterlab.core.busy import ratio_judge, retry
from clusterlab.core.checks import launch_answer, not_attempted, passed
from clusterlab.data_parallel.ranks import dp_mlp, one_thread_per_rank

#: Measured / predicted seen in the book's runs, fastest step (lowest, highest).
COMM_RATIO_SEEN = {"quiet": (0.97, 1.7), "two busy loops": (0.57, 8.5)}


#: Allowed measured / predicted time of the per-tensor all-reduces of one step.
COMM_RATIO_BOUNDS = (0.4, 3.0)


#: The hand-written step's wait at a barrier for the slowest rank's backward.
WAIT = "wait for the slowest"


#: Steps left out of every timing: the first steps warm caches and allocators.
WARMUP_STEPS = 2


def _avg_worker(rank, world_size, answer, seed):
    one_thread_per_rank()
    model = dp_mlp(width=8, depth=1, seed=seed)
    gen = torch.Generator().manual_seed(seed + 7919 * rank)
    for p in model.parameters():  # each rank's own gradient, as after backward()
        p.grad = torch.randn(p.shape, generator=gen)
    mine = [p.grad.clone() for p in model.parameters()]
    calls = []
    original = dist.all_reduce

    def counting_all_reduce(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    dist.all_reduce = counting_all_reduce  # only inside this forked rank
    try:
        answer(model, world_size)
    finally:
        dist.all_reduce = original
    got = [p.grad.clone() for p in model.parameters()]
    return {"mine": mine, "got": got, "calls": len(calls)}


def _verdict(results, n, name):
    """Raise AssertionError with a hint unless every rank holds the mean."""
    count = len(results[0]["mine"])
    for i in range(count):
        total = sum(r["mine"][i] for r in results)
        mean = total / n
        for rank, r in enumerate(results):
            got = r["got"][i]
            if got.shape != mean.shape or torch.allclose(got, mean, atol=1e-6):
                continue
            if torch.allclose(got, total, atol=1e-5):
                hint = "it holds the sum over ranks: divide by world_size"
            elif torch.allclose(got, r["mine"][i]):
                hint = "it still holds its own gradient: was it all-reduced?"
            else:
                hint = "check that each slice of the bucket goes back to its tensor"
            raise AssertionError(
                f"{name} on {n} ranks: rank {rank}'s gradient of parameter {i} "
                f"is not the mean over ranks; {hint}"
            )


def average_gradients(fn, world_sizes=(2, 4)) -> bool:
    """Check the exercise: each rank's gradients become the mean over ranks.

    Args:
        fn: the reader's ``average_gradients(model, world_size)``.
        world_sizes: ranks to try, each in [2, 8].

    Returns:
        True when it passes, False when ``fn`` is still a stub.
    """
    name = "average_gradients"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function average_gradients")
    calls = 0
    for n in world_sizes:
        results = launch_answer(
            name,
            _avg_worker,
            n,
            "If it ran out of time, "
            "check that every rank calls the same collectives in the same order.",
            answer=fn,
            seed=2024,
        )
        if results is None:
            return not_attempted(name)
        _verdict(results, n, name)
        calls = max(calls, results[0]["calls"])
    if calls > 1:
        raise AssertionError(
            f"{name} gives the right mean but called dist.all_reduce {calls} times; "
            "copy the gradients into one flat bucket and all-reduce it once"
        )
    sizes = ", ".join(str(n) for n in world_sizes)
    return passed(
        name,
        f"every rank holds the mean gradient on {sizes} ranks, with one all-reduce",
    )


def fsdp_bytes_per_rank(fn) -> bool:
    """Check the exercise: model-state bytes per rank, fp32 Adam, any ZeRO stage.

    Args:
        fn: the reader's ``fsdp_bytes_per_rank(n_params, world_size, zero_stage)``.

    Returns:
        True when it passes, False when ``fn`` is still a stub.
    """
    from clusterlab.models.memory import training_memory

    name = "fsdp_bytes_per_rank"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function fsdp_bytes_per_rank")
    for n_params in (1e6, 7e9):
        for world_size in (1, 2, 8, 64):
            for stage in (0, 1, 2, 3):
                try:
                    got = float(fn(n_params, world_size, stage))
                except NotImplementedError:
                    return not_attempted(name)
                want = training_memory(
                    n_params,
                    dp=world_size,
                    zero_stage=stage,
                    weight_bytes=4,
                    grad_bytes=4,
                    optimizer_bytes=8,
                )["total"]
                if abs(got - want) <= 1e-9 * want:
                    continue
                if abs(got - 16 * n_params / world_size) <= 1e-9 * want:
                    hint = "below stage 3 not everything is sharded"
                elif abs(got - 16 * n_params) <= 1e-9 * want:
                    hint = "the sharded parts are divided by world_size"
                else:
                    hint = (
                        "weights 4 B, gradients 4 B, Adam's moments 8 B per parameter"
                    )
                raise AssertionError(
                    f"{name}({n_params:g}, {world_size}, {stage}) returned {got:,.0f} "
                    f"bytes; the ZeRO formula gives {want:,.0f}: {hint}"
                )
    return passed(name, "matches ZeRO's formula for stages 0-3 and 1-64 ranks")


def best_step_s(out, key: str = "comm_s", mode: str = "hand") -> float:
    """The fastest step after the warm-up, each step timed by its slowest rank.

    Noise on a shared machine only adds time, so the fastest step is the one to
    set beside a model, as the benchmark keeps its fastest block.

    Args:
        out: ``cl.launch(dp_train_worker, ...)``'s per-rank results.
        key: ``compute_s``, ``comm_s`` or ``step_s``.
        mode: ``hand`` or ``ddp``.
    """
    per_rank = [r[mode][key] for r in out]
    steps = len(per_rank[0])
    if steps <= WARMUP_STEPS:
        raise ValueError(f"out has {steps} steps; more than {WARMUP_STEPS} needed")
    return min(max(t[i] for t in per_rank) for i in range(WARMUP_STEPS, steps))


def _allreduce(nbytes, n, alpha_s, bw_Bps):
    from clusterlab.models.collectives import allreduce_time

    return allreduce_time(nbytes, n, alpha_s, bw_Bps)


def _fit_alpha(sizes):
    """A fresh all-reduce fit on 2 ranks: (alpha per step, bandwidth)."""
    from clusterlab.core.alpha_beta import fit_alpha_beta
    from clusterlab.core.bench import bench_collective

    bench = bench_collective("all_reduce", sizes, 2, iters=20)
    two_alpha_s, bw_Bps = fit_alpha_beta(bench["size_bytes"], bench["time_s"])
    return two_alpha_s / 2, bw_Bps


def comm_prediction(
    out,
    tensor_bytes,
    alpha_s: float,
    bw_Bps: float,
    *,
    fit_sizes=(4, 2**8, 2**12, 2**16, 2**20),
    bounds=COMM_RATIO_BOUNDS,
    tries: int = 3,
    predict=None,
    train_kwargs=None,
) -> dict:
    """Check the per-tensor all-reduces of a 2-rank step against the alpha–beta model.

    The first try uses the reader's training run and fit; a later try fits
    alpha and beta again and trains again on 2 ranks.

    Args:
        out: per-rank results of ``dp_train_worker`` on 2 ranks (mode ``hand``).
        tensor_bytes: bytes of each gradient tensor, one all-reduce each.
        alpha_s, bw_Bps: latency per ring step (s) and bandwidth (bytes/s).
        fit_sizes: all-reduce sizes in bytes for a later try's fit.
        bounds: ``(low, high)`` allowed for measured / predicted.
        tries: measurements at most, in [1, 10].
        predict: ``predict(nbytes, n, alpha_s, bw_Bps) -> seconds``, the ring
            all-reduce by default (tests pass wrong ones).
        train_kwargs: keywords for ``dp_train_worker`` on a later try.

    Returns:
        ``{"measured_s", "predicted_s", "ratio", "tries"}``.

    Raises:
        AssertionError: every try fell outside ``bounds``.
    """
    from clusterlab.core.launcher import launch
    from clusterlab.data_parallel.ranks import dp_train_worker

    predict = predict or _allreduce
    kwargs = dict(steps=6, modes=("hand",), **(train_kwargs or {}))

    def measure(attempt):
        run, a, b = out, alpha_s, bw_Bps
        if attempt > 1:
            a, b = _fit_alpha(list(fit_sizes))
            run = launch(dp_train_worker, 2, **kwargs)
        measured = best_step_s(run)
        predicted = float(sum(predict(s, 2, a, b) for s in tensor_bytes))
        return dict(
            measured_s=measured, predicted_s=predicted, ratio=measured / predicted
        )

    done = retry(
        measure,
        ratio_judge("fastest step's all-reduces", "model", bounds),
        what="alpha-beta model of the per-tensor all-reduces",
        hint="far above the bound, the model leaves out a cost paid per "
        "all-reduce (alpha); far below, it counts one that is not paid",
        tries=tries,
        numbered=True,
    )
    return dict(done.result, tries=done.tries)


def step_parts(parts) -> bool:
    """Check what the data-parallel lab reads off its measured step times.

    Args:
        parts: seconds indexed by world size (1 and 4 at least), with the columns
            ``compute``, ``all-reduce`` (hand-written, per tensor), optionally
            ``wait for the slowest`` (its barrier) and ``whole step
            (overlapped)`` (DDP).

    Returns:
        True; raises ``AssertionError`` naming what does not hold.
    """
    ddp = "whole step (overlapped)"
    comm_1, comm_4 = parts.loc[1, "all-reduce"], parts.loc[4, "all-reduce"]
    if not comm_4 > comm_1:
        raise AssertionError(
            f"the all-reduces took {comm_4 * 1e3:.2f} ms on 4 ranks and "
            f"{comm_1 * 1e3:.2f} ms on 1: communication should grow with ranks"
        )
    hand = [c for c in ("compute", WAIT, "all-reduce") if c in parts.columns]
    hand_4 = parts.loc[4, hand].sum()
    if not parts.loc[4, ddp] < hand_4:
        raise AssertionError(
            f"DDP's step took {parts.loc[4, ddp] * 1e3:.2f} ms on 4 ranks, the "
            f"hand-written one {hand_4 * 1e3:.2f} ms: buckets should beat one "
            "all-reduce per tensor"
        )
    return True


# -- Overlap across a slow link ------------------------------------------------
#: How far each cap's exposed communication may land from the bucket model, as
#: a share of the all-reduce of every gradient. Runs here (2 nodes at 300 Mbit/s,
#: eight 1 MiB layers, 240 ms of backward) landed within 0.04 to 0.11 of it on a
#: quiet machine and within 0.16 beside a full test run.
OVERLAP_TOLERANCE = 0.2

#: The least share of the all-reduce that the most buckets must hide, against
#: one bucket (0.64 to 0.79 quiet, 0.53 beside a full test run).
OVERLAP_HIDDEN_AT_LEAST = 1 / 3


def overlap_matches_buckets(table) -> dict:
    """A judge for ``cl.core.busy.retry``: the bucket model explains the sweep.

    Args:
        table: ``overlap.predicted``'s table (``exposed_s``,
            ``model_exposed_s``, ``allreduce_s``, ``buckets``).

    Returns:
        ``{"status", "text"}``: ``"pass"`` when every cap's exposed
        communication is within ``OVERLAP_TOLERANCE`` of the all-reduce of the
        model's, and the most buckets hide at least ``OVERLAP_HIDDEN_AT_LEAST``
        of it against one bucket; ``"miss"`` otherwise. A model that hides
        nothing misses at the most buckets, one that hides everything at one
        bucket.
    """
    need = {"exposed_s", "model_exposed_s", "allreduce_s", "buckets"}
    if not need <= set(table.columns):
        raise ValueError(f"table lacks {sorted(need - set(table.columns))}")
    if table["buckets"].nunique() < 2:
        raise ValueError("table has one bucket count: sweep at least two caps")
    comm = float(table["allreduce_s"].median())
    off = (table["exposed_s"] - table["model_exposed_s"]).abs() / comm
    worst = table.loc[off.idxmax()]
    one = table.loc[table["buckets"].idxmin()]
    most = table.loc[table["buckets"].idxmax()]
    hidden = (one["exposed_s"] - most["exposed_s"]) / comm
    text = (
        f"exposed communication within {off.max():.2f} of the {comm * 1e3:.0f} ms "
        f"all-reduce of the model's (allowed {OVERLAP_TOLERANCE}; worst at "
        f"{int(worst['buckets'])} buckets: {worst['exposed_s'] * 1e3:.0f} ms "
        f"measured, {worst['model_exposed_s'] * 1e3:.0f} ms modelled); "
        f"{int(most['buckets'])} buckets hide {hidden:.2f} of it against "
        f"{int(one['buckets'])} (at least {OVERLAP_HIDDEN_AT_LEAST:.2f})"
    )
    ok = off.max() <= OVERLAP_TOLERANCE and hidden >= OVERLAP_HIDDEN_AT_LEAST
    return {"status": "pass" if ok else "miss", "text": text}


__all__ = [
    "average_gradients",
    "comm_prediction",
    "fsdp_bytes_per_rank",
    "overlap_matches_buckets",
    "step_parts",
]
