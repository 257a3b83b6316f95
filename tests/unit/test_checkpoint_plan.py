"""A checkpoint plan held to its goodput by simulation, and failures not exponential."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clusterlab.checkpointing.check import plan_reaches_goodput
from clusterlab.checkpointing.sim import JobParams, failure_gaps, goodput_sweep
from clusterlab.models import checkpointing as M

MTBF_S = 4_665_600 / 419  # Llama 3's 54 days over its 419 unexpected interruptions


def _plan(cost_s, interval_s):
    return JobParams(
        n_parts=1,
        part_mtbf_s=MTBF_S,
        checkpoint_cost_s=cost_s,
        restart_s=0.0,
        interval_s=interval_s,
    )


def test_the_exact_plan_reaches_its_goodput_in_simulation():
    c = M.checkpoint_cost_for_goodput(0.9, MTBF_S)
    got = plan_reaches_goodput(_plan(c, M.optimal_interval(c, MTBF_S)), 0.9)
    assert abs(got - 0.9) < 0.001


def test_a_plan_from_youngs_first_order_formula_misses():
    # first order: goodput = 1 - sqrt(2 C / M), so C = M (1 - g)^2 / 2
    c = MTBF_S * 0.1**2 / 2
    with pytest.raises(AssertionError, match="the formula behind it is off"):
        plan_reaches_goodput(_plan(c, math.sqrt(2 * c * MTBF_S)), 0.9)


@pytest.mark.parametrize("shape", [0.5, 0.7, 1.0, 2.0])
def test_weibull_gaps_keep_their_mean(shape):
    gaps = failure_gaps(1000.0, 200_000, seed=0, distribution="weibull", shape=shape)
    assert np.mean(gaps) == pytest.approx(1000.0, rel=0.02)


def test_bunched_failures_move_the_best_interval_past_youngs():
    c = M.checkpoint_cost_for_goodput(0.9, MTBF_S)
    tau = M.optimal_interval(c, MTBF_S)
    taus = np.geomspace(tau / 4, tau * 4, 81)
    best = {}
    for k in (1.0, 0.5):
        sweep = goodput_sweep(
            _plan(c, tau), taus, n_failures=200_000, distribution="weibull", shape=k
        )
        best[k] = sweep.loc[sweep.goodput.idxmax(), "interval_s"]
    assert abs(best[1.0] / tau - 1) < 0.1
    assert best[0.5] > 1.1 * tau


def test_bad_distributions_are_named():
    with pytest.raises(ValueError, match="distribution"):
        failure_gaps(1.0, 10, distribution="lognormal")
    with pytest.raises(ValueError, match="shape"):
        failure_gaps(1.0, 10, distribution="weibull", shape=0.1)
