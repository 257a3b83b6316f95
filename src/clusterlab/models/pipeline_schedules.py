"""Play pipeline schedules' lists of actions, split backward included.

A schedule is, for every rank, a list of actions: ``(2, "F", 1)`` is stage 2's
forward of micro-batch 1, ``"B"`` a whole backward, and the zero-bubble
schedules split a backward into ``"I"`` (the input's gradient, which the
previous stage waits for) and ``"W"`` (the weights' gradient, which nobody
waits for; Qi et al. 2024). ``cl.models.pipeline_orders`` writes such lists
from each schedule's published rule; :func:`parse_actions` reads them as
PyTorch prints its own. :func:`play_actions` plays them out with a time per
stage and kind of pass, and a delay for each action (no delay: the schedule
alone):

* ``F(s, i)`` waits for ``F(s - 1, i)``;
* ``I(s, i)`` and ``B(s, i)`` wait for ``I``/``B`` of ``(s + 1, i)``, or on the
  last stage for its own ``F(s, i)``;
* ``W(s, i)`` waits for ``I(s, i)``.

A stage holds a micro-batch's activations from the start of its forward to
the end of its W (or its full B): :func:`held_activations` counts them.
:func:`zb_h1_bubble_fraction` is the closed form of the ZB-H1 schedule.

:func:`zero_bubble_schedule` is another kind of model, the policy the
chapter's diagram draws: a greedy ZB-H1-like schedule where each stage,
whenever it is free, runs a ready B first, else a ready F if it holds fewer
than ``p - s`` micro-batches (1F1B's memory), else a pending W. Its result has
the columns of :func:`clusterlab.models.pipeline.simulate_schedule`, with
phases ``fwd``, ``bwd`` (B) and ``wgt`` (W).
"""

from __future__ import annotations

import re

import pandas as pd

from clusterlab.core.validate import check_float, check_int

_ACTION = re.compile(r"^(\d+)([FIWB])(\d+)$")


def zb_h1_bubble_fraction(
    stages: int, microbatches: int, f: float = 1.0, b: float = 1.0, w: float = 1.0
) -> float:
    """Idle share of a step of ZB-H1, the zero-bubble schedule with 1F1B's memory.

    1F1B idles ``(p - 1)(f + b + w)`` per stage; ZB-H1 moves W passes into the
    drain and leaves ``(p - 1)(f + b - w)`` (Qi et al. 2024, section 2.1), a
    third of 1F1B's when the three passes take equal time. Each stage is busy
    ``m (f + b + w)``.

    Args:
        stages: p, >= 1; microbatches: m, >= p (ZB-H1 warms up like 1F1B).
        f, b, w: forward, input-gradient and weight-gradient times, > 0, with
            ``w <= f + b``.

    Returns:
        The idle share of the step, in [0, 1).
    """
    p = check_int("stages", stages, 1)
    m = check_int("microbatches", microbatches, p)
    f, b, w = (
        check_float(n, t, 0.0, low_inclusive=False)
        for n, t in (("f", f), ("b", b), ("w", w))
    )
    if w > f + b:
        raise ValueError(f"w={w} must be at most f + b = {f + b}")
    idle = (p - 1) * (f + b - w)
    return idle / (m * (f + b + w) + idle)


def parse_actions(actions) -> list[tuple[int, str, int]]:
    """``["0F0", "2I1", ...]`` as ``[(stage, kind, micro-batch), ...]``.

    Actions that are not computation (``"0REDUCE_GRAD"``, sends, receives)
    are dropped.

    Args:
        actions: strings as torch prints its ``_Action`` objects.

    Returns:
        The computations, in order; kind is "F", "I", "W" or "B".
    """
    out = []
    for a in actions:
        hit = _ACTION.match(str(a))
        if hit:
            out.append((int(hit[1]), hit[2], int(hit[3])))
    return out


def stage_times(name, value, stages):
    """A time for each of ``stages`` stages: one number for all, or one each.

    ``value`` is a number, a dict stage -> time, or a sequence (list, tuple,
    Series, array) in stage order; each time must be > 0. ``name`` is the
    argument's name in the error.
    """
    if isinstance(value, dict):
        each = dict(value)
    elif hasattr(value, "__len__") and not isinstance(value, str | bytes):
        each = dict(enumerate(list(value)))
    else:
        each = None
    if each is not None:
        if set(each) != set(range(stages)):
            raise ValueError(
                f"{name} has {len(each)} times for the stages {sorted(each)}: "
                f"give one for each stage 0 .. {stages - 1}"
            )
        return [
            check_float(f"{name}[{k}]", each[k], 0.0, low_inclusive=False)
            for k in range(stages)
        ]
    return [check_float(name, value, 0.0, low_inclusive=False)] * stages


def _kind_delays(delay_s):
    """kind -> seconds each action of that kind starts late."""
    if isinstance(delay_s, dict):
        unknown = set(delay_s) - set("FBIW")
        if unknown:
            raise ValueError(
                f"delay_s has kinds {sorted(unknown)}: allowed 'F', 'B', 'I', 'W'"
            )
        return {k: check_float(f"delay_s[{k!r}]", delay_s.get(k, 0.0), 0.0)
                for k in "FBIW"}  # fmt: skip
    return dict.fromkeys("FBIW", check_float("delay_s", delay_s, 0.0))


def play_actions(
    orders: dict,
    f=1.0,
    b=1.0,
    w=1.0,
    *,
    delay_s=0.0,
) -> pd.DataFrame:
    """Play each rank's list of actions out; each starts when it can.

    Args:
        orders: rank -> list of ``(stage, kind, micro-batch)`` (see
            :func:`parse_actions`); the stages are numbered 0 .. S - 1 over all
            ranks.
        f, b, w: time of a stage's forward, input-gradient and weight-gradient
            pass (a full backward B takes ``b + w``), > 0: one number for every
            stage, or a list (or dict) with one per stage.
        delay_s: time each action starts after it could (after its rank's
            previous action and its input), >= 0: messages and the runtime
            between passes; 0 for the schedule alone. One number, or a dict
            kind ("F", "B", "I", "W") -> seconds (a kind left out: 0).

    Returns:
        One row per action: ``stage`` (the rank, a Gantt row), ``chunk`` (the
        pipeline stage), ``microbatch``, ``phase`` ("fwd", "bwd", "wgt"),
        ``start``, ``end``, sorted by rank and start.

    Raises:
        ValueError: an order that waits for an action nobody runs, or a stage
            with no time.
    """
    if not orders:
        raise ValueError("orders={} is empty: give each rank its actions")
    last = max(s for acts in orders.values() for s, _, _ in acts)
    times = {k: stage_times(n, t, last + 1) for k, n, t in
             (("F", "f", f), ("I", "b", b), ("W", "w", w))}  # fmt: skip
    times["B"] = [x + y for x, y in zip(times["I"], times["W"], strict=True)]
    delay = _kind_delays(delay_s)
    phase = {"F": "fwd", "I": "bwd", "B": "bwd", "W": "wgt"}

    done, rows = {}, []
    nxt = {r: 0 for r in orders}
    free = {r: None for r in orders}
    left = sum(len(a) for a in orders.values())
    while left:
        moved = False
        for r, acts in orders.items():
            while nxt[r] < len(acts):
                s, kind, i = acts[nxt[r]]
                if kind == "F":
                    dep = ("F", s - 1, i) if s > 0 else None
                elif kind == "W":
                    dep = ("I", s, i)
                else:
                    dep = ("I", s + 1, i) if s < last else ("F", s, i)
                if dep is not None and dep not in done:
                    break
                waits = [t for t in (free[r], done.get(dep)) if t is not None]
                start = max(waits) + delay[kind] if waits else 0.0
                end = start + times[kind][s]
                # A full backward also stands for the input gradient it holds.
                done[(kind if kind != "B" else "I", s, i)] = end
                free[r] = end
                rows.append((r, s, i, phase[kind], start, end))
                nxt[r] += 1
                left -= 1
                moved = True
        if not moved:
            raise ValueError(f"orders deadlock: each rank's next action is {nxt}")
    cols = ["stage", "chunk", "microbatch", "phase", "start", "end"]
    df = pd.DataFrame(rows, columns=cols)
    return df.sort_values(["stage", "start"], ignore_index=True)


def held_activations(timeline: pd.DataFrame, weights: dict | None = None) -> pd.Series:
    """Most micro-batches whose activations each rank holds at once.

    A micro-batch's activations on a stage are held from the start of its
    forward to the end of its weight-gradient pass ("wgt"), or of its full
    backward where no "wgt" row follows.

    Args:
        timeline: columns ``stage`` (rank), ``chunk``, ``phase``, ``start``,
            ``end`` (from :func:`play_actions` or a measured step).
        weights: chunk -> share of a rank's layers it holds (default: each
            chunk ``1 / chunks on that rank``), so the count is in whole
            micro-batches through all of a rank's layers.

    Returns:
        Series indexed by rank, named ``held_microbatches``.
    """
    if timeline.empty:
        raise ValueError("timeline is empty: play or measure a schedule first")
    df = timeline.copy()
    if weights is None:
        per_rank = df.groupby("stage")["chunk"].nunique()
        weights = {c: 1 / per_rank[r] for r, c in zip(df.stage, df.chunk, strict=True)}
    df["wt"] = df["chunk"].map(weights)
    split = set(df.loc[df.phase == "wgt", "chunk"])
    frees = (df.phase == "wgt") | ((df.phase == "bwd") & ~df.chunk.isin(split))
    events = pd.concat(
        [
            df.loc[df.phase == "fwd"].assign(t=lambda d: d.start, d=lambda d: d.wt),
            df.loc[frees].assign(t=lambda d: d.end, d=lambda d: -d.wt),
        ]
    ).sort_values(["stage", "t", "d"])
    held = events.groupby("stage")["d"].cumsum()
    return held.groupby(events["stage"]).max().round(6).rename("held_microbatches")


def zero_bubble_schedule(
    stages: int,
    microbatches: int,
    *,
    fwd_time: float = 1.0,
    bwd_time: float = 1.0,
    wgt_time: float = 1.0,
) -> pd.DataFrame:
    """Play out the greedy zero-bubble (ZB-H1-like) schedule.

    Args:
        stages: pipeline stages p, >= 1.
        microbatches: micro-batches m, >= 1.
        fwd_time, bwd_time, wgt_time: time of one stage's F, B and W of one
            micro-batch (any unit; B + W is the whole backward).

    Returns:
        DataFrame ``stage, chunk, microbatch, phase, start, end`` (chunk 0),
        sorted by stage and start.
    """
    p = check_int("stages", stages, 1)
    m = check_int("microbatches", microbatches, 1)
    times = {
        "fwd": check_float("fwd_time", fwd_time, 0.0, low_inclusive=False),
        "bwd": check_float("bwd_time", bwd_time, 0.0, low_inclusive=False),
        "wgt": check_float("wgt_time", wgt_time, 0.0, low_inclusive=False),
    }
    free = [0.0] * p
    nf, nb = [0] * p, [0] * p
    pending_w = [[] for _ in range(p)]
    done = {}
    rows = []
    while len(rows) < 3 * p * m:
        best = None
        for s in range(p):
            choice = _next_op(s, p, m, free, nf, nb, pending_w, done)
            if choice is not None and (best is None or choice[0] < best[0]):
                best = (*choice, s)
        if best is None:
            raise RuntimeError(f"zero-bubble schedule deadlocked at {nf}, {nb}")
        start, phase, mb, s = best
        end = start + times[phase]
        rows.append((s, 0, mb, phase, start, end))
        free[s] = end
        done[(phase, s, mb)] = end
        if phase == "fwd":
            nf[s] += 1
        elif phase == "bwd":
            nb[s] += 1
            pending_w[s].append(mb)
        else:
            pending_w[s].remove(mb)
    cols = ["stage", "chunk", "microbatch", "phase", "start", "end"]
    return pd.DataFrame(rows, columns=cols).sort_values(
        ["stage", "start"], ignore_index=True
    )


def _next_op(s, p, m, free, nf, nb, pending_w, done):
    """(start, phase, micro-batch) of stage ``s``'s next op, or None if blocked."""
    ready = []
    if nb[s] < nf[s]:
        dep = (
            done.get(("bwd", s + 1, nb[s]))
            if s < p - 1
            else done.get(("fwd", s, nb[s]))
        )
        if dep is not None:
            ready.append((max(free[s], dep), 0, "bwd", nb[s]))
    if nf[s] < m and nf[s] - nb[s] < p - s:
        dep = done.get(("fwd", s - 1, nf[s])) if s > 0 else 0.0
        if dep is not None:
            ready.append((max(free[s], dep), 1, "fwd", nf[s]))
    if pending_w[s]:
        ready.append((free[s], 2, "wgt", pending_w[s][0]))
    if not ready:
        return None
    now = min(r[0] for r in ready)
    # Among the ops that can start at the earliest moment, B before F before W.
    start, _, phase, mb = min(r for r in ready if r[0] == now)
    return start, phase, mb


__all__ = [
    "held_activations",
    "parse_actions",
    "play_actions",
    "zb_h1_bubble_fraction",
    "zero_bubble_schedule",
]
