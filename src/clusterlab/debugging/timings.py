"""Per-rank step timings that single out a slow rank, and the rule that decides.

A slow rank does not hang a job; it makes every step as long as its own. The
stragglers chapter's model says how long a step should be when every rank draws
its compute time from the same distribution (the expected maximum of N), so a
measured step well above that, together with one rank whose typical compute is
far above the others', names the culprit.

The rule, used here and by the preflight check alike (``slow_ranks``): a rank is
an outlier when its median is worse than the median over all ranks by more than
a factor ``OUTLIER_RATIO`` (1.5: half as slow again). Medians, not means, so one
unlucky step (a page fault, a busy core) does not flag a healthy rank.

``run_step_timings`` measures such timings for real: ranks run the stragglers
lab's training loop, each sleeping for a drawn compute time, one rank drawing
``slow_factor`` times more.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from clusterlab.core.launcher import launch
from clusterlab.core.validate import check_choice, check_float, check_int
from clusterlab.models.stragglers import expected_step_time
from clusterlab.stragglers.ranks import straggler_train_worker
from clusterlab.stragglers.sim import StragglerParams, draw_compute_times

#: A rank is an outlier when it is worse than the median rank by this factor.
OUTLIER_RATIO = 1.5


def outliers(values: dict, *, higher_is_worse: bool, ratio: float = OUTLIER_RATIO):
    """Keys whose value is worse than the median of all values by ``ratio``.

    Args:
        values: key (a rank, a node, a link) -> a measurement > 0 (a time, or a
            rate such as FLOP/s or bytes/s).
        higher_is_worse: True for times, False for rates.
        ratio: the factor, > 1.

    Returns:
        Sorted keys of the outliers.
    """
    check_float("ratio", ratio, 1.0, 100.0, low_inclusive=False)
    if not values:
        return []
    vals = {k: float(v) for k, v in values.items()}
    if any(not np.isfinite(v) or v <= 0 for v in vals.values()):
        raise ValueError(f"values={vals} must all be finite and > 0")
    med = float(np.median(list(vals.values())))
    if higher_is_worse:
        return sorted(k for k, v in vals.items() if v > ratio * med)
    return sorted(k for k, v in vals.items() if v < med / ratio)


def slow_ranks(timings: pd.DataFrame, column: str = "compute_s", ratio=OUTLIER_RATIO):
    """Ranks whose median ``column`` (seconds per step) is an outlier.

    Args:
        timings: one row per rank and step, with ``rank`` and ``column``.
        column: the time to compare (seconds, higher is worse).
        ratio: the rule's factor (``OUTLIER_RATIO``).

    Returns:
        Sorted ranks.
    """
    if not isinstance(timings, pd.DataFrame) or not {"rank", column} <= set(
        timings.columns
    ):
        raise ValueError(f"timings must be a DataFrame with 'rank' and {column!r}")
    med = timings.dropna(subset=[column]).groupby("rank")[column].median()
    return outliers(med.to_dict(), higher_is_worse=True, ratio=ratio)


def simulated_step_timings(
    world_size: int = 16,
    *,
    slow_rank: int | None = 5,
    slow_factor: float = 1.3,
    steps: int = 20,
    base_s: float = 0.1,
    cv: float = 0.1,
    seed: int = 0,
) -> pd.DataFrame:
    """Per-rank compute times drawn as the stragglers simulation draws them.

    The same columns as ``run_step_timings`` (``step_s`` is the slowest rank's
    compute), without running anything: for the widget, and for sizes no
    laptop runs.

    Args:
        world_size: ranks, in [2, 4096].
        slow_rank: the rank ``slow_factor`` times slower, or None.
        slow_factor: in [1, 10].
        steps: in [1, 10**4].
        base_s: mean compute per step, s, > 0.
        cv: normal jitter, in [0, 1].
        seed: seeds the draws.
    """
    world_size = check_int("world_size", world_size, 2, 4096)
    if slow_rank is not None:
        check_int("slow_rank", slow_rank, 0, world_size - 1)
    check_float("slow_factor", slow_factor, 1.0, 10.0)
    draws = draw_compute_times(
        StragglerParams(world_size, steps, base_s, "normal", cv), seed
    )
    if slow_rank is not None:
        draws[:, slow_rank] *= slow_factor
    steps_idx, ranks = np.meshgrid(
        np.arange(steps), np.arange(world_size), indexing="ij"
    )
    return pd.DataFrame(
        {
            "rank": ranks.ravel(),
            "step": steps_idx.ravel(),
            "compute_s": draws.ravel(),
            "step_s": np.repeat(draws.max(axis=1), world_size),
            "drawn_s": draws.ravel(),
        }
    )


def run_step_timings(
    world_size: int = 4,
    *,
    slow_rank: int | None = 2,
    slow_factor: float = 2.0,
    steps: int = 8,
    base_s: float = 0.02,
    cv: float = 0.1,
    seed: int = 0,
    timeout_s: float = 30.0,
) -> pd.DataFrame:
    """Run a real data-parallel loop and record each rank's time per step.

    Args:
        world_size: ranks, in [2, 8].
        slow_rank: the rank that computes ``slow_factor`` times longer, or None.
        slow_factor: in [1, 10].
        steps: steps, in [2, 200].
        base_s: mean compute per step, in [0.001, 1] s.
        cv: normal jitter of the compute time, in [0, 0.5].
        seed: seeds the draws.
        timeout_s: the launch's timeout.

    Returns:
        One row per rank and step: ``rank``, ``step``, ``compute_s`` (from
        leaving the last all-reduce to reaching this one), ``step_s`` (the whole
        step, the same on every rank) and ``drawn_s`` (the injected compute).
    """
    world_size = check_int("world_size", world_size, 2, 8)
    if slow_rank is not None:
        check_int("slow_rank", slow_rank, 0, world_size - 1)
    check_float("slow_factor", slow_factor, 1.0, 10.0)
    check_int("steps", steps, 2, 200)
    check_float("base_s", base_s, 0.001, 1.0)
    check_float("cv", cv, 0.0, 0.5)
    params = StragglerParams(world_size, steps, base_s, "normal", cv)
    draws = draw_compute_times(params, seed)
    if slow_rank is not None:
        draws[:, slow_rank] *= slow_factor
    recs = launch(
        straggler_train_worker,
        world_size,
        timeout=timeout_s,
        scenarios=[{"compute_s": draws, "sync_period": 1}],
        n_features=256,
        seed=seed,
    )
    ends = np.max([r[0]["end"] for r in recs], axis=0)
    start = max(r[0]["start"] for r in recs)
    began = np.concatenate([[start], ends[:-1]])
    rows = []
    for rank, rec in enumerate(recs):
        arrive = np.asarray(rec[0]["arrive"])
        for step in range(steps):
            rows.append(
                dict(
                    rank=rank,
                    step=step,
                    compute_s=arrive[step] - began[step],
                    step_s=ends[step] - began[step],
                    drawn_s=draws[step, rank],
                )
            )
    return pd.DataFrame(rows)


def straggler_verdict(timings: pd.DataFrame, jitter: str = "normal") -> dict:
    """The straggler model as a detector: is the step longer than jitter explains?

    The healthy ranks' compute times give the mean and the coefficient of
    variation; the model's expected step for N such ranks is what jitter alone
    would cost. A slow rank explains the rest: the model with that rank slower
    by its measured factor should match the measured step.

    Args:
        timings: the result of ``run_step_timings`` (``rank``, ``compute_s``,
            ``step_s``).
        jitter: the distribution assumed for the healthy ranks.

    Returns:
        ``slow_ranks``, ``measured_step_s`` (median step, compute only: the
        slowest rank's compute), ``jitter_only_s`` (the model without the slow
        ranks) and ``with_slow_s`` (the model with them), ``slow_factor``.
    """
    check_choice("jitter", jitter, ("normal", "lognormal", "exponential"))
    slow = slow_ranks(timings)
    healthy = timings[~timings["rank"].isin(slow)]["compute_s"]
    base_s, cv = float(healthy.mean()), float(healthy.std() / healthy.mean())
    n = int(timings["rank"].nunique())
    measured = float(timings.groupby("step")["compute_s"].max().median())
    factor = 1.0
    if slow:
        slow_med = timings[timings["rank"].isin(slow)]["compute_s"].median()
        factor = float(min(100.0, max(1.0, slow_med / healthy.median())))
    cv = min(max(cv, 0.0), 1.0)
    return {
        "slow_ranks": slow,
        "measured_step_s": measured,
        "jitter_only_s": expected_step_time(n, base_s, jitter, cv),
        "with_slow_s": expected_step_time(
            n, base_s, jitter, cv, slow_workers=len(slow), slow_factor=factor
        ),
        "slow_factor": factor,
    }


__all__ = [
    "OUTLIER_RATIO",
    "outliers",
    "run_step_timings",
    "simulated_step_timings",
    "slow_ranks",
    "straggler_verdict",
]
