"""Checks for checkpointing: the exercise (the first-order waste of an interval),
and a checkpoint plan held to its goodput in simulation."""

from __future__ import annotations

import numpy as np

from clusterlab.core.checks import not_attempted, passed
from clusterlab.core.units import HOUR_S
from clusterlab.models.checkpointing import young_daly_interval


def _call(fn, name, *args):
    try:
        return fn(*args), None
    except NotImplementedError:
        return None, not_attempted(name)


def checkpoint_waste(fn) -> bool:
    """Check the exercise: ``fn(interval_s, checkpoint_cost_s, mtbf_s)``.

    Besides the values, the waste must be smallest at Young's interval.
    """
    name = "checkpoint_waste"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function {name}")
    for c, m in [(60.0, 48 * HOUR_S), (600.0, 3 * HOUR_S), (5.0, 1000.0)]:
        young = young_daly_interval(c, m)
        taus = young * np.geomspace(0.25, 4.0, 41)
        got = []
        for tau in taus:
            value, stub = _call(fn, name, float(tau), c, m)
            if stub is not None:
                return stub
            got.append(value)
        want = c / taus + taus / (2 * m)
        got = np.asarray(got, dtype=float)
        if np.allclose(got, want, rtol=1e-9):
            continue
        if np.allclose(got, c / taus + taus / m, rtol=1e-9):
            hint = "a failure lands on average halfway through an interval: tau / 2"
        elif np.allclose(got, taus / (2 * m), rtol=1e-9):
            hint = "each interval also pays one checkpoint: C / tau"
        else:
            hint = (
                "waste = time writing checkpoints + work lost to failures, per second"
            )
        best = taus[int(np.argmin(got))]
        raise AssertionError(
            f"{name}(tau, C={c}, M={m}) is off: at tau = Young's {young:,.0f} s it "
            f"returned {got[20]:.4g}, expected {want[20]:.4g} (your minimum is at "
            f"{best:,.0f} s). Hint: {hint}."
        )
    return passed(name, "right values, and smallest at sqrt(2 C M) on 3 jobs")


#: How far a plan's simulated goodput may fall from its target: about seven
#: times the spread of 100,000 simulated failures (0.0002), and half of what
#: Young's first-order formula misses a 90% plan for Llama 3 by (0.003).
PLAN_TOLERANCE = 0.0015


def plan_reaches_goodput(plan, target: float, *, seed: int = 1, n_failures=100_000):
    """Simulate a checkpoint plan and hold it to the goodput it was made for.

    The plan (a cost ``C`` and an interval ``tau`` chosen by a closed form) is
    run through ``cl.checkpointing.sim.goodput_sweep``: failures drawn one by
    one, segments kept or lost, no formula. Its goodput must be within
    ``PLAN_TOLERANCE`` of ``target``.

    Args:
        plan: ``cl.checkpointing.sim.JobParams`` with ``checkpoint_cost_s`` and
            ``interval_s`` set (``part_mtbf_s / n_parts`` is the job's MTBF).
        target: the goodput the plan promises, in (0, 1).

    Returns:
        The simulated goodput.

    Raises:
        AssertionError: the simulation missed the target.
    """
    from clusterlab.checkpointing.sim import goodput_sweep
    from clusterlab.core.validate import check_float

    target = check_float("target", target, 0.0, 1.0, low_inclusive=False)
    run = goodput_sweep(plan, [plan.interval_s], seed=seed, n_failures=n_failures)
    got = float(run["goodput"].iloc[0])
    if abs(got - target) > PLAN_TOLERANCE:
        raise AssertionError(
            f"the plan (C = {plan.checkpoint_cost_s:.1f} s every "
            f"{plan.interval_s:.0f} s) reached {got:.4f} in simulation, not "
            f"{target:.4f} (allowed {PLAN_TOLERANCE:g}): the formula behind it is off"
        )
    return got


__all__ = ["PLAN_TOLERANCE", "checkpoint_waste", "plan_reaches_goodput"]
