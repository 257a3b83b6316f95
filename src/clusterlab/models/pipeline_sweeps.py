"""Sweeps of the pipeline model, as tables for the pipeline charts.

``cl.pipeline.chart`` only draws; the schedules it shows and the bubble curve it
draws under measured points are computed here, from
:func:`~clusterlab.models.pipeline.simulate_schedule` and
:func:`~clusterlab.models.pipeline.bubble_fraction`.
"""

from __future__ import annotations

import functools

import pandas as pd

from clusterlab.core.validate import check_choice, check_int
from clusterlab.models.pipeline import (
    PIPELINE_SCHEDULES,
    bubble_fraction,
    simulate_schedule,
    simulated_bubble,
)

#: Schedules the explorer offers: label -> (schedule, interleave).
PIPELINE_EXPLORER_SCHEDULES = {
    "GPipe": ("gpipe", 1),
    "1F1B": ("1f1b", 1),
    "interleaved 1F1B, v = 2": ("1f1b", 2),
}


def bubble_curve(
    stages: int, max_microbatches: int, schedule: str = "1f1b", interleave: int = 1
) -> pd.DataFrame:
    """The bubble formula for m = 1 .. ``max_microbatches`` (valid m only).

    Args:
        stages: pipeline stages p, >= 1.
        max_microbatches: largest m, >= 1.
        schedule: "1f1b" or "gpipe".
        interleave: chunks per GPU v (m then runs over multiples of p).

    Returns:
        Columns ``stages, microbatches, bubble``.
    """
    p = check_int("stages", stages, 1)
    top = check_int("max_microbatches", max_microbatches, 1)
    schedule = check_choice("schedule", schedule, PIPELINE_SCHEDULES)
    v = check_int("interleave", interleave, 1)
    ms = [m for m in range(1, top + 1) if v == 1 or m % p == 0]
    bubbles = [bubble_fraction(p, m, schedule, v) for m in ms]
    return pd.DataFrame({"stages": p, "microbatches": ms, "bubble": bubbles})


@functools.lru_cache(maxsize=4)
def _sweep(max_p: int, max_m: int):
    ops, notes = [], []
    for label, (schedule, v) in PIPELINE_EXPLORER_SCHEDULES.items():
        for p in range(2, max_p + 1):
            for m in range(1, max_m + 1):
                key = f"{label}|{p}|{m}"
                if v > 1 and m % p:
                    notes.append((key, f"interleaving needs m a multiple of p={p}"))
                    continue
                sim = simulate_schedule(p, m, schedule, interleave=v)
                ops.append(sim.assign(key=key, v=v))
                idle = simulated_bubble(sim)
                formula = bubble_fraction(p, m, schedule, v)
                notes.append(
                    (
                        key,
                        f"idle {idle:.1%} of the stages' time; "
                        f"formula (p − 1)/(v·m + p − 1) = {formula:.1%}",
                    )
                )
    ops_df = pd.concat(ops, ignore_index=True)
    return ops_df, pd.DataFrame(notes, columns=["key", "msg"])


def schedule_sweep(
    max_stages: int = 8, max_microbatches: int = 12
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every schedule of the explorer, simulated, for p = 2 .. max, m = 1 .. max.

    Forward passes take 1 time unit, backward passes 2. Interleaved cases
    exist only where p divides m; the notes say so for the others.

    Args:
        max_stages: largest p, in [2, 8].
        max_microbatches: largest m, in [1, 16].

    Returns:
        ``(ops, notes)``: ``ops`` has the columns of ``simulate_schedule`` plus
        ``key`` ("label|p|m") and ``v``; ``notes`` has ``key, msg`` (the idle
        share against the formula). Cached: treat them as read-only.
    """
    max_p = check_int("max_stages", max_stages, 2, 8)
    max_m = check_int("max_microbatches", max_microbatches, 1, 16)
    return _sweep(max_p, max_m)


__all__ = ["PIPELINE_EXPLORER_SCHEDULES", "bubble_curve", "schedule_sweep"]
