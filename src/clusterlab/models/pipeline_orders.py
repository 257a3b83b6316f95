"""Pipeline schedules from their published rules: each rank's order, then its time.

A pipeline schedule is, for every rank, a fixed order of passes: ``F`` (a
stage's forward of one micro-batch), ``B`` (its whole backward), or, in the
zero-bubble schedules of Qi et al. (2024), ``I`` (the gradient of the stage's
input, which the previous stage waits for) and ``W`` (the gradient of its
weights, which nobody waits for). :func:`schedule_order` writes each rank's
order from the schedule's own rule, and :func:`play_schedule` plays it out
with a forward, input-gradient and weight-gradient time per stage (so the last
stage, which also holds the loss, can be heavier): each pass starts when its
rank is free and its input is there. Nothing here reads any library's list of
actions; the rules are the papers':

* ``"1f1b"`` (Narayanan et al. 2021), the loop layout with ``v`` chunks per
  rank (stage ``s`` on rank ``s mod p``). With ``v = 1``, rank ``r`` runs
  ``p - 1 - r`` forwards, then one forward and one backward in turn, then the
  backwards left. With ``v > 1`` (interleaved 1F1B) micro-batches go through a
  rank's chunks in groups of ``p``: forwards through chunk 0 for the first
  ``p`` micro-batches, chunk 1 for the same ``p``, ..., backwards through the
  chunks in reverse; ``2(p - 1 - r) + (v - 1)p`` forwards come before the first
  backward. Megatron-LM runs every forward first when ``m = p``
  (``cl.models.pipeline.simulate_schedule`` follows it); this rule does not.
* ``"zb_h1"`` (Qi et al. 2024, ZB-H1), the same layout and the same order of
  forwards and input gradients, with half of interleaving's extra warm-up
  (``(p - 1 - r) + (v - 1)p`` forwards), every backward split into I and W,
  and rank ``r`` holding its W passes ``r`` input gradients back: then every
  rank holds ``p`` micro-batches' activations at most, 1F1B's first stage's
  peak, and the W passes held back fill the end of the step, where 1F1B's
  first stages wait for the drain. With equal stages that leaves ``(p - 1)(F +
  B - W)`` idle per rank instead of 1F1B's ``(p - 1)(F + B + W)``
  (:func:`clusterlab.models.pipeline_schedules.zb_h1_bubble_fraction`).
* ``"zbv"`` (Qi et al. 2024, ZB-V), two chunks per rank in a V: rank ``r``
  holds stages ``r`` (on the way down) and ``2p - 1 - r`` (on the way back),
  so rank 0 turns the pipe round itself. Its order is the paper's: a warm-up
  of ``2(p - r) - 1`` forwards down, ``r`` pairs of forwards (back, down), and
  ``p - r`` forward-I-W triples back; then, in turn, one forward down with its
  I and W and one forward back with its I and W; then the input gradients
  left (``r`` pairs down and back, then down with a W each), and the W passes
  left. It is written for at least ``2p - 1`` micro-batches; with fewer the
  same order runs without the missing ones.
"""

from __future__ import annotations

from collections import deque

import pandas as pd

from clusterlab.core.validate import check_choice, check_float, check_int
from clusterlab.models.pipeline_schedules import play_actions, stage_times

#: Each schedule's layout: "loop" (stage s on rank s mod p) or the "v".
SCHEDULE_LAYOUTS = {"1f1b": "loop", "zb_h1": "loop", "zbv": "v"}


def _check_shape(schedule, ranks, microbatches, chunks):
    schedule = check_choice("schedule", schedule, tuple(SCHEDULE_LAYOUTS))
    p = check_int("ranks", ranks, 1)
    m = 1 if microbatches is None else check_int("microbatches", microbatches, 1)
    if SCHEDULE_LAYOUTS[schedule] == "v":
        v = check_int("chunks", chunks, 2, 2)
    else:
        v = check_int("chunks", chunks, 1)
    if microbatches is not None and v > 1 and schedule != "zbv" and m % p:
        raise ValueError(
            f"microbatches={m} must be a multiple of ranks={p} with chunks={v}: "
            "interleaving sends micro-batches through the chunks in groups of p"
        )
    return schedule, p, m, v


def stage_ranks(schedule: str, ranks: int, chunks: int = 1) -> list[int]:
    """The rank that holds each of the ``ranks * chunks`` stages.

    Args:
        schedule: a name of :data:`SCHEDULE_LAYOUTS`.
        ranks: p, >= 1; chunks: stages per rank v, >= 1 (2 for ``"zbv"``).

    Returns:
        ``owner[s]``, the rank of stage ``s``: ``s mod p`` in the loop, and in
        the V ``s`` on the way down, ``2p - 1 - s`` on the way back.
    """
    schedule, p, _, v = _check_shape(schedule, ranks, None, chunks)
    if SCHEDULE_LAYOUTS[schedule] == "v":
        return [s if s < p else 2 * p - 1 - s for s in range(2 * p)]
    return [s % p for s in range(p * v)]


def _groups(p, m, v, rank, backward):
    """(stage, micro-batch) of a rank's passes, in groups of p through its chunks."""
    out = []
    for first in range(0, m, p):
        for c in range(v):
            chunk = v - 1 - c if backward else c
            out += [(chunk * p + rank, first + i) for i in range(min(p, m - first))]
    return out


def _loop_order(p, m, v, rank, warm, split, hold):
    """One rank's order: ``warm`` forwards, then F and backward in turn.

    With ``split`` each backward is an I, and its W follows once ``hold``
    more input gradients have run (the rest close the order).
    """
    fwd = _groups(p, m, v, rank, backward=False)
    bwd = _groups(p, m, v, rank, backward=True)
    warm = min(warm, len(fwd))
    order = [(s, "F", i) for s, i in fwd[:warm]]
    held = deque()
    for k, (s, i) in enumerate(bwd):
        if warm + k < len(fwd):
            order.append((fwd[warm + k][0], "F", fwd[warm + k][1]))
        order.append((s, "I" if split else "B", i))
        if split:
            held.append((s, i))
            if len(held) > hold:
                order.append(_w(held.popleft()))
    return order + [_w(a) for a in held]


def _w(stage_mb):
    s, i = stage_mb
    return (s, "W", i)


def _v_order(p, m, rank):
    """One rank's ZB-V order (Qi et al. 2024, section 6), for m >= 2p - 1."""
    down, back = rank, 2 * p - 1 - rank
    done, order = {}, []

    def run(*passes):  # each (kind, stage) pass runs its next micro-batch
        for kind, stage in passes:
            i = done.get((kind, stage), 0)
            order.append((stage, kind, i))
            done[(kind, stage)] = i + 1

    def left(kind, stage):
        return m - done.get((kind, stage), 0)

    run(*[("F", down)] * (2 * (p - rank) - 1))  # fill the way down
    run(*[("F", back), ("F", down)] * rank)  # the way back reaches this rank
    run(*[("F", back), ("I", back), ("W", back)] * (p - rank))
    while left("F", back):  # steady: one micro-batch down, one back
        run(*[("F", down)] * min(1, left("F", down)))
        run(("I", down), ("W", down), ("F", back), ("I", back), ("W", back))
    run(*[("I", down), ("I", back)] * rank)  # drain: input gradients first
    run(*[("I", down), ("W", down)] * (p - rank))
    run(*[("W", back)] * left("W", back), *[("W", down)] * left("W", down))
    return order


def schedule_order(
    schedule: str, ranks: int, microbatches: int, chunks: int = 1
) -> dict[int, list[tuple[int, str, int]]]:
    """Each rank's passes, in the order the schedule's rule gives.

    Args:
        schedule: ``"1f1b"`` (interleaved when ``chunks > 1``), ``"zb_h1"``
            (interleaved when ``chunks > 1``) or ``"zbv"``.
        ranks: p, >= 1.
        microbatches: m, >= 1; a multiple of p for the loop with chunks > 1.
        chunks: stages per rank v, >= 1 (exactly 2 for ``"zbv"``).

    Returns:
        rank -> list of ``(stage, kind, micro-batch)``, kind "F", "B", "I" or
        "W", stages numbered 0 .. p v - 1 along the model (as
        ``cl.models.pipeline_schedules.play_actions`` takes them).
    """
    schedule, p, m, v = _check_shape(schedule, ranks, microbatches, chunks)
    if schedule == "zbv":
        big = max(m, 2 * p - 1)
        return {r: [a for a in _v_order(p, big, r) if a[2] < m] for r in range(p)}
    out = {}
    for r in range(p):
        if schedule == "1f1b":
            warm = p - 1 - r if v == 1 else 2 * (p - 1 - r) + (v - 1) * p
            out[r] = _loop_order(p, m, v, r, warm, split=False, hold=0)
        else:
            warm = (p - 1 - r) + (v - 1) * p
            out[r] = _loop_order(p, m, v, r, warm, split=True, hold=r)
    return out


def play_schedule(
    schedule: str,
    ranks: int,
    microbatches: int,
    *,
    chunks: int = 1,
    fwd_s=1.0,
    bwd_s=1.0,
    wgt_s=1.0,
    delay_s=0.0,
) -> pd.DataFrame:
    """Play a schedule's own order out with a time per stage and pass.

    Args:
        schedule, ranks, microbatches, chunks: as for :func:`schedule_order`.
        fwd_s, bwd_s, wgt_s: seconds of a stage's forward, input-gradient and
            weight-gradient pass of one micro-batch, > 0: one number for every
            stage or one per stage (``ranks * chunks``, in model order). A
            whole backward ("B", in 1F1B) takes ``bwd_s + wgt_s``.
        delay_s: seconds each pass starts after it could (a message, the
            runtime between passes), >= 0; the rules assume 0. One number,
            or a dict kind ("F", "B", "I", "W") -> seconds.

    Returns:
        One row per pass: ``stage`` (the rank, a Gantt row), ``chunk`` (the
        pipeline stage), ``microbatch``, ``phase`` ("fwd", "bwd", "wgt"),
        ``start``, ``end``, as ``play_actions`` returns.
    """
    schedule, p, m, v = _check_shape(schedule, ranks, microbatches, chunks)
    n = p * v
    times = [stage_times(k, t, n) for k, t in
             (("fwd_s", fwd_s), ("bwd_s", bwd_s), ("wgt_s", wgt_s))]  # fmt: skip
    orders = schedule_order(schedule, p, m, v)
    return play_actions(orders, *times, delay_s=delay_s)


def bubble_gaps(bubbles) -> pd.DataFrame:
    """How far each schedule's bubble lies from the nearest other schedule's.

    A measurement can tell two schedules apart only if its error band is
    narrower than the gap between their bubbles.

    Args:
        bubbles: schedule -> idle share (a dict or a Series), two or more.

    Returns:
        DataFrame indexed by schedule: ``gap`` (``min |bubble - other|``) and
        ``nearest`` (that other schedule).
    """
    values = {
        k: check_float(f"bubbles[{k!r}]", v, 0.0, 1.0) for k, v in dict(bubbles).items()
    }
    if len(values) < 2:
        raise ValueError(
            f"bubbles has {len(values)} schedules: a gap needs two or more"
        )
    rows = {}
    for k, x in values.items():
        near = min((abs(x - y), j) for j, y in values.items() if j != k)
        rows[k] = {"gap": near[0], "nearest": near[1]}
    return pd.DataFrame.from_dict(rows, orient="index")


__all__ = [
    "SCHEDULE_LAYOUTS",
    "bubble_gaps",
    "play_schedule",
    "schedule_order",
    "stage_ranks",
]
