"""The pipeline bubble: closed form and a discrete schedule that checks it.

A pipeline of ``p`` stages runs ``m`` micro-batches per step. Each stage is
idle while the first micro-batch fills the pipe and while the last one drains
it. Convention used here, for every schedule: the **bubble fraction** is the
idle share of each stage's step time,

    bubble = idle / (busy + idle) = (p - 1) / (m + p - 1)      (GPipe, 1F1B)

(Huang et al. 2019; Narayanan et al. 2021). Over the *ideal* time instead of
the step time the same bubble is ``(p - 1) / m``, the form Narayanan et al.
quote; both are in :func:`bubble_fraction`'s docstring so that no reader mixes
them up. Interleaving (each GPU holds ``v`` model chunks, Megatron's
interleaved 1F1B) shrinks the fill and drain time ``v`` times:

    bubble = (p - 1) / (v * m + p - 1)

1F1B has the same bubble as GPipe; what it buys is memory: a stage holds at
most ``p`` micro-batches' activations instead of ``m``. Interleaving costs
memory back: its first stage holds ``p + (p - 1)/v`` micro-batches' worth
(:func:`in_flight_microbatches`), and it needs ``m`` a multiple of ``p``.

:func:`simulate_schedule` plays a schedule out op by op (forward 1 time unit,
backward 2 by default, no communication time) and returns a Gantt table; the
tests check that its idle share equals :func:`bubble_fraction` exactly.
"""

from __future__ import annotations

import pandas as pd

from clusterlab.core.validate import check_choice, check_float, check_int

PIPELINE_SCHEDULES = ("1f1b", "gpipe")


def bubble_fraction(
    stages: int, microbatches: int, schedule: str = "1f1b", interleave: int = 1
) -> float:
    """Idle fraction of a pipeline stage's step time.

    ``(p - 1) / (v*m + p - 1)`` with ``p`` stages, ``m`` micro-batches and ``v``
    chunks per GPU (``v = 1`` without interleaving). The same bubble measured
    against the ideal, bubble-free time is ``(p - 1) / (v*m)``; the step takes
    ``1 + (p - 1)/(v*m)`` times the ideal.

    Args:
        stages: pipeline stages p, >= 1.
        microbatches: micro-batches per step m, >= 1.
        schedule: "1f1b" or "gpipe" (same bubble; 1F1B saves memory).
        interleave: model chunks per GPU v, >= 1; only with "1f1b".

    Returns:
        The idle fraction, in [0, 1).
    """
    p = check_int("stages", stages, 1)
    m = check_int("microbatches", microbatches, 1)
    schedule = check_choice("schedule", schedule, PIPELINE_SCHEDULES)
    v = check_int("interleave", interleave, 1)
    _check_interleave(p, m, schedule, v)
    return (p - 1) / (v * m + p - 1)


def _check_interleave(p, m, schedule, v):
    if v > 1 and schedule != "1f1b":
        raise ValueError(
            f"interleave={v} needs schedule='1f1b' (interleaving is a 1F1B "
            "variant); use interleave=1 with 'gpipe'"
        )
    if v > 1 and m % p:
        raise ValueError(
            f"microbatches={m} must be a multiple of stages={p} when "
            f"interleave={v}: the interleaved schedule sends micro-batches "
            "through the chunks in groups of p"
        )


def in_flight_microbatches(
    stages: int,
    microbatches: int,
    schedule: str = "1f1b",
    interleave: int = 1,
    stage: int = 0,
) -> float:
    """Micro-batches whose activations a stage holds at its peak.

    In units of one whole stage's activations (with ``v`` chunks, one chunk
    holds ``1/v`` of them). GPipe holds all ``m``; 1F1B holds ``min(p - s, m)``
    on stage ``s``. Interleaved 1F1B runs ``2(p - s - 1) + (v - 1)p`` chunk
    forwards before its first backward, plus one in the steady state, so it
    holds ``min((2(p - s - 1) + (v - 1)p + 1) / v, m)``: on the first stage
    ``p + (p - 1)/v`` = ``p * (1 + (p - 1)/(p*v))``, the factor of Korthikanti
    et al. 2022 (section 4.2.3) for Megatron's schedule (Narayanan et al. 2021).
    With ``m = p`` that schedule runs every forward first, so each stage holds
    all ``m``.
    :func:`peak_in_flight` measures the same on a simulated schedule.

    Args:
        stages: pipeline stages p, >= 1.
        microbatches: micro-batches per step m, >= 1 (a multiple of p when
            ``interleave > 1``).
        schedule: "1f1b" or "gpipe".
        interleave: model chunks per GPU v, >= 1 (1F1B only).
        stage: which stage, in [0, p - 1] (0 holds the most).

    Returns:
        Micro-batches in flight at the stage's peak (a float with v > 1).
    """
    p = check_int("stages", stages, 1)
    m = check_int("microbatches", microbatches, 1)
    schedule = check_choice("schedule", schedule, PIPELINE_SCHEDULES)
    v = check_int("interleave", interleave, 1)
    s = check_int("stage", stage, 0, p - 1)
    _check_interleave(p, m, schedule, v)
    if schedule == "gpipe":
        return float(m)
    if v == 1:
        return float(min(p - s, m))
    if m == p:
        return float(m)
    return min((2 * (p - s - 1) + (v - 1) * p + 1) / v, float(m))


def _stage_order(stage, p, m, schedule, v):
    """The (phase, chunk, micro-batch) ops one stage runs, in its own order."""
    if schedule == "gpipe":
        fwd = [("fwd", 0, i) for i in range(m)]
        # Backward in reverse, so the last stage starts at once on the last one.
        return fwd + [("bwd", 0, i) for i in reversed(range(m))]
    if v == 1:
        warm = min(p - stage - 1, m)
        ops = [("fwd", 0, i) for i in range(warm)]
        for i in range(m - warm):
            ops += [("fwd", 0, warm + i), ("bwd", 0, i)]
        return ops + [("bwd", 0, i) for i in range(m - warm, m)]
    # Megatron's interleaved 1F1B: micro-batches go in groups of p; a group
    # runs through chunk 0, then chunk 1, ... forward, and in reverse backward.
    total = m * v

    def pick(k, forward):
        chunk = (k % (p * v)) // p
        mb = (k // (p * v)) * p + k % p
        return (chunk if forward else v - 1 - chunk), mb

    warm = total if m == p else min((p - stage - 1) * 2 + (v - 1) * p, total)
    ops = [("fwd", *pick(k, True)) for k in range(warm)]
    for i in range(total - warm):
        ops += [("fwd", *pick(warm + i, True)), ("bwd", *pick(i, False))]
    return ops + [("bwd", *pick(k, False)) for k in range(total - warm, total)]


def simulate_schedule(
    stages: int,
    microbatches: int,
    schedule: str = "1f1b",
    *,
    interleave: int = 1,
    fwd_time: float = 1.0,
    bwd_time: float = 2.0,
    comm_time: float = 0.0,
) -> pd.DataFrame:
    """Play a pipeline schedule out op by op, each message taking ``comm_time``.

    Each stage runs its ops in its schedule's order; an op starts when its
    stage is free and its input is ready (the previous stage's forward, or the
    next stage's backward). With ``interleave = v`` each GPU holds ``v`` chunks,
    each op lasts ``1/v`` of a whole stage's time, and ``microbatches`` must be
    a multiple of ``stages``.

    Args:
        stages: pipeline stages p (GPUs), >= 1.
        microbatches: micro-batches m, >= 1.
        schedule: "1f1b" or "gpipe".
        interleave: model chunks per GPU v, >= 1 (1F1B only).
        fwd_time, bwd_time: time of one stage's forward and backward of one
            micro-batch (any unit; default 1 and 2).
        comm_time: delay from the end of an op to the start of the op it feeds
            on another GPU (a message and the receiver's wake-up), >= 0; the
            closed form assumes 0.

    Returns:
        DataFrame with one row per op: ``stage, chunk, microbatch, phase``
        ("fwd"/"bwd"), ``start, end``, sorted by stage and start.
    """
    p = check_int("stages", stages, 1)
    m = check_int("microbatches", microbatches, 1)
    schedule = check_choice("schedule", schedule, PIPELINE_SCHEDULES)
    v = check_int("interleave", interleave, 1)
    tf = check_float("fwd_time", fwd_time, 0.0, low_inclusive=False)
    tb = check_float("bwd_time", bwd_time, 0.0, low_inclusive=False)
    tc = check_float("comm_time", comm_time, 0.0)
    _check_interleave(p, m, schedule, v)
    n_virtual = p * v
    orders = [_stage_order(s, p, m, schedule, v) for s in range(p)]
    nxt = [0] * p
    free = [0.0] * p
    done = {}  # (phase, virtual stage, micro-batch) -> end time
    rows = []
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for s in range(p):
            while nxt[s] < len(orders[s]):
                phase, chunk, mb = orders[s][nxt[s]]
                vs = chunk * p + s
                if phase == "fwd":
                    dep = ("fwd", vs - 1, mb) if vs > 0 else None
                elif vs < n_virtual - 1:
                    dep = ("bwd", vs + 1, mb)
                else:
                    dep = ("fwd", vs, mb)
                if dep is not None and dep not in done:
                    break
                ready = done.get(dep, 0.0)
                if dep is not None and dep[1] % p != s:  # fed by another GPU
                    ready += tc
                start = max(free[s], ready)
                end = start + (tf if phase == "fwd" else tb) / v
                done[(phase, vs, mb)] = end
                free[s] = end
                rows.append((s, chunk, mb, phase, start, end))
                nxt[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # a wrong order would wait forever; say so
            raise RuntimeError(f"schedule {schedule!r} deadlocked at {nxt}")
    cols = ["stage", "chunk", "microbatch", "phase", "start", "end"]
    return pd.DataFrame(rows, columns=cols).sort_values(
        ["stage", "start"], ignore_index=True
    )


def simulated_bubble(schedule_df: pd.DataFrame) -> float:
    """Idle fraction of a simulated schedule: ``1 - busy / (stages * makespan)``.

    Args:
        schedule_df: output of :func:`simulate_schedule`.

    Returns:
        Idle share of all stages' time between 0 and the last op's end.
    """
    if schedule_df.empty:
        raise ValueError("schedule_df is empty: simulate a schedule first")
    makespan = schedule_df["end"].max() - schedule_df["start"].min()
    busy = (schedule_df["end"] - schedule_df["start"]).sum()
    n_stages = schedule_df["stage"].nunique()
    return float(1.0 - busy / (n_stages * makespan))


def peak_in_flight(schedule_df: pd.DataFrame) -> pd.Series:
    """Most micro-batches each stage holds activations for at once.

    A micro-batch is in flight on a stage from the start of its forward to the
    end of its backward (summed over chunks with interleaving, in units of one
    whole stage). 1F1B peaks at ``min(p - stage, m)``; GPipe at ``m``.

    Args:
        schedule_df: output of :func:`simulate_schedule`.

    Returns:
        Series indexed by stage.
    """
    if schedule_df.empty:
        raise ValueError("schedule_df is empty: simulate a schedule first")
    v = schedule_df["chunk"].max() + 1
    # +1 when a forward starts, -1 when a backward ends; the running sum peaks.
    events = pd.concat(
        [
            schedule_df.loc[schedule_df.phase == "fwd", ["stage", "start"]]
            .rename(columns={"start": "t"})
            .assign(d=1),
            schedule_df.loc[schedule_df.phase == "bwd", ["stage", "end"]]
            .rename(columns={"end": "t"})
            .assign(d=-1),
        ]
    ).sort_values(["stage", "t", "d"])
    held = events.groupby("stage")["d"].cumsum()
    return (held.groupby(events["stage"]).max() / v).rename("peak_in_flight")


__all__ = [
    "PIPELINE_SCHEDULES",
    "bubble_fraction",
    "in_flight_microbatches",
    "peak_in_flight",
    "simulate_schedule",
    "simulated_bubble",
]
