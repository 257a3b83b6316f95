"""Checks for the interleaved and zero-bubble schedules: bubble, and (v, m) under a cap.

:func:`schedule_bubble_verdict` decides whether each schedule's measured
bubble fits its prediction. Noise only adds idle time (messages take time,
torch's runtime runs between passes), so a measurement below the prediction by
more than :data:`SCHEDULE_FLOOR` rejects the prediction for good; above it by
more than :data:`SCHEDULE_ALLOWANCE`, the machine may have been busy and
:func:`check_schedule_bubbles` measures again (bounded).

:func:`choose_schedule` grades the exercise: the chunks per GPU ``v`` and the
micro-batches ``m`` with the smallest bubble whose activations fit a cap.
"""

from __future__ import annotations

import pandas as pd

from clusterlab.core.busy import retry
from clusterlab.core.checks import not_attempted, passed
from clusterlab.core.validate import check_float
from clusterlab.models.pipeline import bubble_fraction, in_flight_microbatches

#: Idle share the stamps cannot resolve (one percentage point).
SCHEDULE_FLOOR = 0.01


#: Idle share torch's runtime and gloo's messages may add between padded passes
#: of 20 ms: 5 to 9 points were measured on a loaded two-core machine.
SCHEDULE_ALLOWANCE = 0.12


def schedule_bubble_verdict(
    table: pd.DataFrame,
    floor: float = SCHEDULE_FLOOR,
    allowance: float = SCHEDULE_ALLOWANCE,
) -> pd.DataFrame:
    """Mark each schedule "fits", "below" (impossible) or "above" (too busy?).

    Args:
        table: columns ``schedule, measured, predicted`` (idle shares), as
            ``cl.pipeline.schedules.compare_schedules`` returns.
        floor: how far below the prediction a measurement may sit, in [0, 1].
        allowance: how far above, in [0, 1].

    Returns:
        The table with a ``verdict`` column.
    """
    lo = check_float("floor", floor, 0.0, 1.0)
    hi = check_float("allowance", allowance, 0.0, 1.0)
    missing = {"schedule", "measured", "predicted"} - set(table.columns)
    if missing:
        raise ValueError(f"table lacks the columns {sorted(missing)}")
    gap = table["measured"] - table["predicted"]
    verdict = gap.map(lambda g: "below" if g < -lo else "above" if g > hi else "fits")
    return table.assign(verdict=verdict)


def check_schedule_bubbles(measure, tries: int = 3) -> pd.DataFrame:
    """Measure (``measure()`` -> table) until every schedule fits; fail on "below".

    Args:
        measure: a function of no arguments returning a table for
            :func:`schedule_bubble_verdict` (one launch of the schedules).
        tries: measurements at most, in [1, 10].

    Returns:
        The verdict table of the first try where every schedule fits.

    Raises:
        AssertionError: a measurement below its prediction (the model is
            wrong: noise cannot remove idle time), or "above" on every try.
    """

    def judge(table):
        table = schedule_bubble_verdict(table)
        if (table.verdict == "below").any():
            rows = table[table.verdict == "below"]
            return "wrong", (
                "measured less idle time than predicted for "
                f"{list(rows.schedule)} ({rows.measured.round(3).tolist()} against "
                f"{rows.predicted.round(3).tolist()}): noise only adds idle "
                "time, so the prediction is wrong"
            )
        over = table[table.verdict == "above"]
        if len(over):
            text = f"{list(over.schedule)} idled more than predicted + allowance"
            return "miss", text
        return "pass", "every schedule within its bound"

    done = retry(
        measure,
        judge,
        what="pipeline schedules' bubbles",
        hint="a prediction far below the measurement on every try is wrong",
        tries=tries,
    )
    return schedule_bubble_verdict(done.result)


#: (stages, most micro-batches, cap on micro-batches held, largest v).
_CASES = [
    (4, 16, 4, 4),
    (4, 16, 5, 4),
    (4, 8, 4, 2),
    (8, 32, 8, 2),
    (8, 32, 12, 2),
    (2, 6, 2, 3),
    (2, 6, 3, 3),
]


def _best(p, max_m, cap, max_v):
    # An independent answer: try every (v, m); the smallest bubble wins, then
    # fewer chunks (fewer messages), then fewer micro-batches.
    best = None
    for v in range(1, max_v + 1):
        for m in range(1, max_m + 1):
            if v > 1 and m % p:
                continue
            if in_flight_microbatches(p, m, "1f1b", v) > cap + 1e-9:
                continue
            key = (bubble_fraction(p, m, "1f1b", v), v, m)
            best = key if best is None or key < best else best
    return None if best is None else (best[1], best[2])


def choose_schedule(fn) -> bool:
    """Check ``fn(stages, max_microbatches, max_held, max_interleave) -> (v, m)``."""
    name = "choose_schedule"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function choose_schedule")
    for p, max_m, cap, max_v in _CASES:
        try:
            got = fn(p, max_m, cap, max_v)
        except NotImplementedError:
            return not_attempted(name)
        want = _best(p, max_m, cap, max_v)
        got = tuple(got) if isinstance(got, list | tuple) else got
        if got == want:
            continue
        hint = "the smallest (p - 1) / (v m + p - 1) whose held activations fit"
        if isinstance(got, tuple) and len(got) == 2:
            v, m = got
            if v > 1 and m % p:
                hint = f"m = {m} is not a multiple of p = {p}, as interleaving needs"
            elif in_flight_microbatches(p, m, "1f1b", v) > cap + 1e-9:
                held = in_flight_microbatches(p, m, "1f1b", v)
                hint = (
                    f"(v, m) = {got} holds {held:.2f} micro-batches on stage 0, "
                    f"over the cap of {cap}: p + (p - 1)/v when m > p"
                )
        raise AssertionError(
            f"{name}(stages={p}, max_microbatches={max_m}, max_held={cap}, "
            f"max_interleave={max_v}) returned {got!r}, expected {want}: {hint}"
        )
    return passed(name, f"{len(_CASES)} cases, 2 to 8 stages")


__all__ = [
    "SCHEDULE_ALLOWANCE",
    "SCHEDULE_FLOOR",
    "check_schedule_bubbles",
    "choose_schedule",
    "schedule_bubble_verdict",
]
