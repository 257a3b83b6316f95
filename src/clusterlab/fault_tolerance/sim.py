"""Failure schedules, and what a schedule costs each way, replayed without a run.

``failure_schedule`` draws the moments a job's parts fail: gaps of mean
``mtbf_s`` from an exponential (a Poisson process, the assumption behind
Young's and Daly's formulas) or a Weibull distribution, each at least
``min_gap_s`` (a part cannot fail again before its replacement is up).

``replay_checkpoint_restart`` walks one job through such a schedule step by
step: work, a checkpoint every ``every`` steps, and at each failure the work
since the last checkpoint lost and a restart paid (a failure during a restart
starts it again). ``replay_per_step`` prices the same failures under per-step
recovery: a stall of the whole job, then one group missing until it trains
again. ``cl.fault_tolerance.race`` runs both for real and sets its measurements
against these replays.
"""

from __future__ import annotations

import numpy as np

from clusterlab.core.validate import check_float, check_int


def failure_schedule(
    mtbf_s: float,
    n: int,
    *,
    seed: int = 0,
    min_gap_s: float = 0.0,
    distribution: str = "exponential",
    shape: float = 1.0,
) -> list[float]:
    """The moments of ``n`` failures, seconds after the start, increasing.

    Each gap is ``min_gap_s`` plus a draw of mean ``mtbf_s - min_gap_s``
    (``cl.checkpointing.sim.failure_gaps``), so the gaps' mean is ``mtbf_s``.

    Args:
        mtbf_s: the mean gap, seconds, in (0, 1e9].
        n: failures, in [1, 1000].
        seed: seeds the draw.
        min_gap_s: the shortest gap, in [0, mtbf_s).
        distribution, shape: ``"exponential"``, or ``"weibull"`` of shape k.
    """
    from clusterlab.checkpointing.sim import failure_gaps

    mtbf_s = check_float("mtbf_s", mtbf_s, 0.0, 1e9, low_inclusive=False)
    n = check_int("n", n, 1, 1000)
    min_gap_s = check_float("min_gap_s", min_gap_s, 0.0, mtbf_s)
    if min_gap_s >= mtbf_s:
        raise ValueError(f"min_gap_s={min_gap_s!r} must be below mtbf_s={mtbf_s!r}")
    gaps = min_gap_s + failure_gaps(mtbf_s - min_gap_s, n, seed, distribution, shape)
    return [float(t) for t in np.cumsum(gaps)]


def _step_times(name: str, values) -> list[float]:
    """``values`` as a list of seconds, each finite and >= 0 (None: [])."""
    if values is None:
        return []
    try:
        times = [float(v) for v in values]
    except (TypeError, ValueError):
        raise ValueError(f"{name}={values!r} must be a list of seconds") from None
    for i, v in enumerate(times):
        if not np.isfinite(v) or v < 0:
            raise ValueError(
                f"{name}[{i}]={v!r} must be a finite number of seconds >= 0"
            )
    return times


def replay_checkpoint_restart(
    fail_at_s,
    *,
    steps: int,
    step_s: float,
    every: int,
    checkpoint_s: float,
    restart_s: float,
    step_times_s=None,
) -> dict:
    """One checkpoint-restart job through a failure schedule, step by step.

    The job does ``steps`` steps of ``step_s``; after every ``every``-th step
    but the last it writes a checkpoint of ``checkpoint_s``. A failure during a
    step or a checkpoint loses every step since the last complete checkpoint and costs
    ``restart_s``; one during a restart starts the restart again.

    Args:
        fail_at_s: failure moments, seconds after the first step began.
        steps: steps of work, in [1, 10**7].
        step_s, checkpoint_s: seconds, (> 0, >= 0).
        restart_s: seconds (>= 0) per restart, or a list of them, one per
            failure in order (a measured run's own restarts).
        every: checkpoint interval, steps, in [1, steps].
        step_times_s: None, or the seconds each completed step took, in the
            order a measured run completed them (steps done again included).
            The replay then gives its n-th completed step the n-th of these,
            so that a failure finds the job where the run was when its step
            time moved; ``step_s`` still times any step beyond the list and is
            the goodput's unit of work.

    Returns:
        ``wall_s`` (the last step's end), ``lost_steps`` (steps done again),
        ``failures`` (those that struck before the end) and ``goodput``
        (``steps * step_s / wall_s``).
    """
    steps = check_int("steps", steps, 1, 10**7)
    step_s = check_float("step_s", step_s, 0.0, 1e6, low_inclusive=False)
    every = check_int("every", every, 1, steps)
    checkpoint_s = check_float("checkpoint_s", checkpoint_s, 0.0, 1e6)
    fails = sorted(float(t) for t in fail_at_s)
    if np.ndim(restart_s) == 0:
        restarts = [check_float("restart_s", restart_s, 0.0, 1e6)] * len(fails)
    else:
        restarts = _step_times("restart_s", restart_s)
        if len(restarts) != len(fails):
            raise ValueError(
                f"restart_s has {len(restarts)} restarts for {len(fails)} "
                "failures: give one number, or one per failure"
            )
    times = _step_times("step_times_s", step_times_s)
    t, done, saved, lost, k, n = 0.0, 0, 0, 0, 0, 0
    while done < steps:
        # the run is over once its last step is done: no checkpoint counted after it
        saves = (done + 1) % every == 0 and done + 1 < steps
        this = times[n] if n < len(times) else step_s
        end = t + this + (checkpoint_s if saves else 0.0)
        if k < len(fails) and fails[k] < end:
            lost += done - saved
            done = saved
            t = fails[k] + restarts[k]  # within a restart: it starts again
            k += 1
            continue
        t, done, n = end, done + 1, n + 1
        if done % every == 0:
            saved = done
    return {
        "wall_s": t,
        "lost_steps": lost,
        "failures": k,
        "goodput": steps * step_s / t,
    }


def replay_per_step(
    fail_at_s,
    recovery_s,
    rejoin_s,
    *,
    window_s: float,
    n_groups: int,
    relative_rate: dict | None = None,
) -> dict:
    """The goodput of a per-step run of ``window_s`` with these failures.

    Failure ``i`` at ``fail_at_s[i]`` stops the whole job for ``recovery_s[i]``
    (until the survivors commit again) and takes one group of ``n_groups`` out
    for ``rejoin_s[i]`` (until it trains again). At any moment the job trains
    at ``1 - absent / n_groups`` of its full rate, or not at all while a stall
    lasts; ``relative_rate[a]``, where given, replaces ``1 - a / n_groups`` with
    the rate measured with ``a`` groups away (on shared cores fewer groups step
    faster, which a cluster with a GPU per group does not see). Failures far
    apart cost ``per_step_waste_s`` each
    (``cl.models.fault_tolerance``); a failure while another group is still
    away costs less than that, because the two losses overlap.

    Args:
        fail_at_s, recovery_s, rejoin_s: per failure, seconds (the first from
            the window's start, the others from the failure).
        window_s: the run's length, seconds (> 0).
        n_groups: replica groups, in [2, 100000].
        relative_rate: ``{groups away: rate / full rate}``, each in [0, 2].

    Returns:
        ``waste_s`` (job-seconds lost), ``failures`` and ``goodput``.
    """
    window_s = check_float("window_s", window_s, 0.0, 1e9, low_inclusive=False)
    n_groups = check_int("n_groups", n_groups, 2, 100_000)
    at, rec, rej = (
        np.atleast_1d(np.asarray(v, float)) for v in (fail_at_s, recovery_s, rejoin_s)
    )
    if not at.shape == rec.shape == rej.shape:
        raise ValueError(
            f"fail_at_s, recovery_s and rejoin_s have {at.size}, {rec.size} and "
            f"{rej.size} values: allowed one of each per failure"
        )
    if np.any(rec < 0) or np.any(rej < 0) or not np.all(np.isfinite(at)):
        raise ValueError("recovery_s and rejoin_s must be >= 0, fail_at_s finite")
    edges = np.unique(
        np.clip(
            np.concatenate([[0.0, window_s], at, at + rec, at + rej]), 0.0, window_s
        )
    )
    mid = (edges[:-1] + edges[1:]) / 2
    stalled = ((mid[:, None] > at) & (mid[:, None] < at + rec)).any(axis=1)
    absent = ((mid[:, None] > at) & (mid[:, None] < at + rej)).sum(axis=1)
    away = np.minimum(absent, n_groups)
    rate = 1.0 - away / n_groups
    for a, r in (relative_rate or {}).items():
        check_float(f"relative_rate[{a}]", r, 0.0, 2.0)
        rate = np.where(away == int(a), r, rate)
    lost = np.where(stalled, 1.0, 1.0 - rate)
    waste = float((lost * np.diff(edges)).sum())
    return {
        "waste_s": waste,
        "failures": int(at.size),
        "goodput": max(0.0, 1.0 - waste / window_s),
    }


__all__ = ["failure_schedule", "replay_checkpoint_restart", "replay_per_step"]
