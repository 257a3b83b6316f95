"""A zero-bubble pipeline schedule: the backward pass split in two.

Qi et al. (2023, "Zero Bubble Pipeline Parallelism") split each backward into
B, the gradient with respect to the stage's input (which the previous stage
waits for), and W, the gradient with respect to its weights (which nobody
waits for). W can then fill the time a stage would spend idle. This module
plays out a greedy version of their ZB-H1 schedule: each stage, whenever it is
free, runs a ready B first, else a ready F if it holds fewer than ``p - s``
micro-batches (1F1B's memory), else a pending W. The result has the columns of
:func:`clusterlab.models.pipeline.simulate_schedule`, with phases ``fwd``,
``bwd`` (B) and ``wgt`` (W).
"""

from __future__ import annotations

import pandas as pd

from .._validate import check_float, check_int

__all__ = ["zero_bubble_schedule"]


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
