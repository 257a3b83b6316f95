"""Exercise check for checkpointing: the first-order waste of an interval."""

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


__all__ = ["checkpoint_waste"]
