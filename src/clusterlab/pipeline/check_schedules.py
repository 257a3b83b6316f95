"""Checks for the interleaved and zero-bubble schedules: bubble, and (v, m) under a cap.

:func:`schedule_bubble_verdict` decides whether each schedule's measured
bubble fits a model's prediction (``cl.pipeline.schedules.compare_schedules``
makes the table). The measured bubble counts only the pads as busy time, so
noise (a late message, torch's runtime between passes, a sleep that overran)
only adds idle time:

    predicted - floor  <=  measured  <=  predicted + allowance + floor

Below, nothing in the noise can explain the gap, and the model is wrong for
good. Above, the machine may have been busier than the run's own noise
showed, and :func:`check_schedule_bubbles` measures again (bounded). The
allowance is the run's own: the idle share its passes' measured lateness adds
to the schedules (``compare_schedules``'s ``allowance``); the floor on either
side is what the stamps cannot resolve.

The band ``allowance + 2 floor`` must be narrower than the smallest gap between
the schedules' predicted bubbles (``gap``): a wider one would let a model that
predicts one schedule's bubble for another pass. The verdict refuses such an
allowance with a ``ValueError``; when a run's own noise is that wide, the
check says the machine was too busy to tell and measures again.

:func:`choose_schedule` grades the exercise: the chunks per GPU ``v`` and the
micro-batches ``m`` with the smallest bubble whose activations fit a cap.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from clusterlab.core.busy import retry
from clusterlab.core.checks import not_attempted, passed
from clusterlab.core.validate import check_float
from clusterlab.models.pipeline import bubble_fraction, in_flight_microbatches
from clusterlab.models.pipeline_orders import bubble_gaps

#: Idle share the stamps cannot resolve, either way: half a point. A run that
#: keeps the rule's order cannot finish sooner than its pads allow, so below
#: the prediction this covers only the clock; above it, the hiccups that the
#: allowance's 90th percentile leaves out.
SCHEDULE_FLOOR = 0.005


def _gaps(table):
    """``gap`` and ``nearest`` per row: the table's own, or from ``predicted``."""
    if {"gap", "nearest"} <= set(table.columns):
        return table[["gap", "nearest"]]
    gaps = bubble_gaps(dict(zip(table["schedule"], table["predicted"], strict=True)))
    return gaps.loc[table["schedule"]].set_index(table.index)


def schedule_band(table: pd.DataFrame, floor: float = SCHEDULE_FLOOR, allowance=None):
    """``(widest band, smallest gap, the two schedules that gap lies between)``.

    Args:
        table: columns ``schedule, predicted`` and, unless ``allowance`` is
            given, ``allowance``; ``gap`` and ``nearest`` if the table carries
            its own (else from ``predicted``).
        floor: idle share the stamps cannot resolve either way, in [0, 1].
        allowance: how much more idle time the noise may add, in [0, 1], for
            every row; None takes the table's ``allowance`` column (the run's
            own noise).

    Returns:
        ``(band, gap, pair)``: ``allowance + 2 floor`` at its widest, the
        smallest gap, and the two schedules nearest each other.
    """
    lo = check_float("floor", floor, 0.0, 1.0)
    missing = {"schedule", "predicted"} - set(table.columns)
    if allowance is None and "allowance" not in table.columns:
        missing.add("allowance")
    if missing:
        raise ValueError(f"table lacks the columns {sorted(missing)}")
    if allowance is None:
        hi = table["allowance"].astype(float)
    else:
        hi = pd.Series(check_float("allowance", allowance, 0.0, 1.0), table.index)
    gaps = _gaps(table)
    first = gaps["gap"].astype(float).idxmin()
    pair = (table.at[first, "schedule"], gaps.at[first, "nearest"])
    return 2 * lo + float(hi.max()), float(gaps.at[first, "gap"]), pair


def schedule_bubble_verdict(
    table: pd.DataFrame,
    floor: float = SCHEDULE_FLOOR,
    allowance=None,
) -> pd.DataFrame:
    """Mark each schedule "fits", "below" (impossible) or "above" (too busy?).

    Args:
        table: columns ``schedule, measured, predicted`` (idle shares),
            ``allowance`` unless given below, and ``gap``, ``nearest`` (else
            taken from ``predicted``), as
            ``cl.pipeline.schedules.compare_schedules`` returns.
        floor: idle share the stamps cannot resolve either way, in [0, 1].
        allowance: how much more idle time the noise may add, in [0, 1], for
            every row; None (the default) takes the table's ``allowance``
            column, the run's own noise.

    Returns:
        The table with ``low``, ``high`` and ``verdict`` columns.

    Raises:
        ValueError: a missing column, or a band ``allowance + 2 floor`` not
            narrower than the smallest gap between the predicted bubbles.
    """
    if "measured" not in table.columns:
        raise ValueError("table lacks the columns ['measured']")
    band, gap, pair = schedule_band(table, floor, allowance)
    if band >= gap:
        raise ValueError(
            f"allowance={band - 2 * floor:.3f} (plus twice the floor of "
            f"{floor:.3f}) is not "
            f"below the smallest gap between the predicted bubbles, {gap:.3f} "
            f"({pair[0]} and {pair[1]}): a measurement could fit either, so the "
            "check could not tell those schedules apart"
        )
    hi = table["allowance"] if allowance is None else float(allowance)
    out = table.assign(
        low=table["predicted"] - floor, high=table["predicted"] + hi + floor
    )
    out["verdict"] = np.select(
        [out["measured"] < out["low"], out["measured"] > out["high"]],
        ["below", "above"],
        "fits",
    )
    return out


def check_schedule_bubbles(measure, tries: int = 3) -> pd.DataFrame:
    """Measure (``measure()`` -> table) until every schedule fits; fail on "below".

    Args:
        measure: a function of no arguments returning a table for
            :func:`schedule_bubble_verdict` (one launch of the schedules).
        tries: measurements at most, in [1, 10].

    Returns:
        The verdict table of the first try where every schedule fits, with a
        ``decided`` column: False when every try was too noisy to tell the
        schedules apart (said in words; then ``verdict`` is "undecided").

    Raises:
        AssertionError: a measurement below its prediction (the model is
            wrong: noise cannot remove idle time), or "above" on every try.
    """

    def judge(table):
        band, gap, pair = schedule_band(table)
        if band >= gap:
            return "busy", (
                f"this run's noise allows {band:.1%} around the predictions, not "
                f"less than the {gap:.1%} between {pair[0]} and {pair[1]}"
            )
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
            text = (
                f"{list(over.schedule)} idled {over.measured.round(3).tolist()}, "
                f"more than predicted + allowance {over.high.round(3).tolist()}"
            )
            return "miss", text
        return (
            "pass",
            f"every schedule within its bound (band {band:.1%} < gap {gap:.1%})",
        )

    done = retry(
        measure,
        judge,
        what="pipeline schedules' bubbles",
        hint="a prediction far below the measurement on every try is wrong",
        tries=tries,
        undecided="the schedules' bubbles were not judged; run it again on a "
        "quieter machine",
    )
    if done.verdict == "busy":
        return done.result.assign(verdict="undecided", decided=False)
    return schedule_bubble_verdict(done.result).assign(decided=True)


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
    "SCHEDULE_FLOOR",
    "check_schedule_bubbles",
    "choose_schedule",
    "schedule_band",
    "schedule_bubble_verdict",
]
