"""The stragglers lab's checks fail on wrong models, and re-measure a busy machine.

Each check that decides a verdict in the lab is fed a wrong input here (a
simulation that takes the mean of the workers instead of their maximum, one
with no straggler, a model with the wrong formula, the claimed 0.3% as jitter)
and must fail. The real-run checks are fed fabricated runs (a simulation plus a
chosen delay), so a quiet and a busy machine can be told apart without timing.
"""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import clusterlab as cl
from clusterlab.stragglers.ranks import _lateness

S, M, C = cl.stragglers.sim, cl.models.stragglers, cl.stragglers.evidence
BASE_S = 0.05
ONE_SLOW = dict(jitter="none", cv=0.0, slow_workers=1)
# The lab's scenarios, at its SMOKE size.
SCENARIOS = {
    "normal jitter, cv 0.3": S.StragglerParams(4, 16, BASE_S, "normal", 0.3),
    "S1: one rank 0.3% slower": S.StragglerParams(
        4, 16, BASE_S, slow_factor=1.003, **ONE_SLOW
    ),
    "one rank 1.5x slower": S.StragglerParams(
        4, 16, BASE_S, slow_factor=1.5, **ONE_SLOW
    ),
    "exponential jitter": S.StragglerParams(4, 16, BASE_S, "exponential", 0.4),
    "local SGD, H=4": S.StragglerParams(
        4, 16, BASE_S, "exponential", 0.4, sync_period=4
    ),
}
ALLREDUCE_S = 0.004


def mean_not_max(params, seed=0, engine="numpy"):
    """A wrong simulation: each round lasts the workers' *mean* compute time."""
    draws = S.draw_compute_times(params, seed)
    starts = np.arange(0, params.n_steps, params.sync_period)
    work = np.add.reduceat(draws, starts, axis=0).mean(axis=1)
    steps = np.diff(np.append(starts, params.n_steps))
    return pd.DataFrame({"round_s": work + params.allreduce_s, "steps": steps})


def no_straggler(params, seed=0, engine="numpy"):
    """A wrong simulation: no jitter and no slow worker."""
    calm = replace(params, jitter="none", cv=0.0, slow_workers=0)
    return S.simulate(calm, seed=seed, engine=engine)


def fake_run(slower_by=0.0, late_frac=0.005, scenarios=SCENARIOS):
    """A runner whose 'real' rounds are the simulation's, ``slower_by`` longer.

    Each round's ranks are ``late_frac`` of the round late, as a real run would
    measure. A quiet machine: ``slower_by`` 0 and a small lateness.
    """

    def run(scens, seed=0, **_):
        frames = []
        for name, p in scens.items():
            df = S.simulate(replace(p, allreduce_s=ALLREDUCE_S), seed=seed)
            late = late_frac * df["round_s"]
            df = df.assign(round_s=df["round_s"] * (1 + slower_by), late_s=late)
            frames.append(df.assign(scenario=name))
        return pd.concat(frames, ignore_index=True)

    return run


def runs(*runners):
    """A runner that plays ``runners`` one after the other, counting calls."""
    calls = []

    def run(scens, seed=0, **kw):
        calls.append(1)
        return runners[min(len(calls), len(runners)) - 1](scens, seed, **kw)

    return run, calls


def measure(run, predict=None, scenarios=SCENARIOS):
    said = []
    predict = predict or C.simulation_predictions(scenarios)
    real, table = C.measure_until_decided(scenarios, predict, run=run, say=said.append)
    return table, " ".join(said)


# ------------------------------------------------ computed against computed
def test_engine_check_fails_when_one_engine_drops_the_slow_worker():
    p = S.StragglerParams(16, 100, BASE_S, cv=0.1, slow_workers=1, slow_factor=1.5)
    assert C.check_engines_agree(p, seed=1)

    def simpy_without_straggler(params, seed=0, engine="numpy"):
        if engine == "simpy":
            params = replace(params, slow_workers=0)
        return S.simulate(params, seed=seed, engine=engine)

    with pytest.raises(AssertionError, match="engines disagree"):
        C.check_engines_agree(p, seed=1, simulate=simpy_without_straggler)


LAB_1024 = [
    S.StragglerParams(1024, 1000, 1.0, cv=0.3),
    S.StragglerParams(1024, 400, 1.0, cv=0.003, slow_workers=1, slow_factor=1.003),
]


@pytest.mark.parametrize("params", LAB_1024, ids=["cv 0.3", "0.3% slow node"])
def test_model_check_passes_for_the_lab_and_fails_when_the_sim_takes_the_mean(params):
    C.check_model_against_simulation(params, seed=1)
    with pytest.raises(AssertionError, match="disagree"):
        C.check_model_against_simulation(params, seed=1, simulate=mean_not_max)


def test_model_check_fails_when_the_model_uses_the_asymptote():
    def asymptote(n_workers, base_s, cv, **_):  # sqrt(2 ln N): too large at 1024
        return base_s * (1 + cv * float(M.gaussian_max_asymptote(n_workers)))

    with pytest.raises(AssertionError, match="disagree"):
        C.check_model_against_simulation(LAB_1024[0], seed=1, model=asymptote)


def test_model_check_fails_when_the_model_amplifies_a_fixed_slowdown():
    def amplified(**kw):  # the claim: 0.3% slow becomes a 72% loss
        return M.expected_step_time(**kw) * 150 / 42

    with pytest.raises(AssertionError, match="disagree"):
        C.check_model_against_simulation(LAB_1024[1], seed=1, model=amplified)


def test_jitter_check_fails_when_the_jitter_is_wrong():
    ratio = 150 / 42
    cv = M.jitter_cv_for_step_ratio(1024, ratio, "exponential")
    assert C.check_jitter_for_ratio(1024, ratio, "exponential", cv) == pytest.approx(
        ratio, rel=0.02
    )
    with pytest.raises(AssertionError, match="not 3.571"):
        C.check_jitter_for_ratio(1024, ratio, "exponential", 0.003)
    normal_cv = M.jitter_cv_for_step_ratio(1024, ratio, "normal")
    with pytest.raises(AssertionError, match="not 3.571"):
        C.check_jitter_for_ratio(1024, ratio, "exponential", normal_cv)


# ------------------------------------------------ measured against predicted
def test_a_quiet_run_agrees_with_the_simulation_of_its_draws():
    run, calls = runs(fake_run())
    table, said = measure(run)
    assert set(table["verdict"]) == {"agrees"} and len(calls) == 1
    assert "agrees within 10%" in said


def test_real_check_fails_when_the_simulation_takes_the_mean_not_the_max():
    run, _ = runs(fake_run())
    wrong = C.simulation_predictions(SCENARIOS, simulate=mean_not_max)
    with pytest.raises(AssertionError, match="the prediction is wrong"):
        measure(run, wrong)


@pytest.mark.parametrize(
    "name", ["normal jitter, cv 0.3", "one rank 1.5x slower", "local SGD, H=4"]
)
def test_real_check_fails_when_the_simulation_has_no_straggler(name):
    one = {name: SCENARIOS[name]}
    run, _ = runs(fake_run(scenarios=one))
    wrong = C.simulation_predictions(one, simulate=no_straggler)
    with pytest.raises(AssertionError, match="the prediction is wrong"):
        measure(run, wrong, scenarios=one)


@pytest.mark.parametrize("factor", [1.0, 1.5 * 150 / 42], ids=["hidden", "amplified"])
def test_slow_rank_check_fails_when_the_slow_rank_is_hidden_or_amplified(factor):
    one = {"one rank 1.5x slower": SCENARIOS["one rank 1.5x slower"]}
    run, _ = runs(fake_run(scenarios=one))

    def predict(real, factor=factor):
        return {"fixed": ("one rank 1.5x slower", factor * BASE_S + ALLREDUCE_S)}

    with pytest.raises(AssertionError, match="the prediction is wrong"):
        measure(run, predict, scenarios=one)
    right = lambda real: {"fixed": ("one rank 1.5x slower", 1.5 * BASE_S + ALLREDUCE_S)}  # noqa: E731
    assert set(measure(run, right, scenarios=one)[0]["verdict"]) == {"agrees"}


def test_a_busy_machine_is_said_in_words_and_measured_again():
    run, calls = runs(fake_run(slower_by=0.2, late_frac=0.25), fake_run())
    table, said = measure(run)
    assert len(calls) == 2 and set(table["verdict"]) == {"agrees"}
    assert "try 1 of 3: this machine was busy" in said
    assert "measuring again" in said


def test_a_machine_that_stays_busy_leaves_the_check_undecided_without_an_error():
    run, calls = runs(fake_run(slower_by=0.2, late_frac=0.25))
    table, said = measure(run)
    assert len(calls) == C.TRIES
    assert "busy" in set(table["verdict"])
    assert f"undecided after {C.TRIES} tries" in said


def test_real_check_fails_when_the_delay_cannot_explain_the_miss():
    # Busy (5% late), but a mean-not-max prediction misses by far more than that.
    run, _ = runs(fake_run(late_frac=0.05))
    wrong = C.simulation_predictions(SCENARIOS, simulate=mean_not_max)
    with pytest.raises(AssertionError, match="not the machine"):
        measure(run, wrong)


def test_a_run_faster_than_predicted_is_never_excused_as_busy():
    assert C.judge(0.85, 1.0, late_s=0.5) == "wrong"
    assert C.judge(1.05, 1.0, late_s=0.0) == "agrees"
    assert C.judge(1.25, 1.0, late_s=0.2) == "busy"
    assert C.judge(1.25, 1.0, late_s=0.1) == "wrong"
    with pytest.raises(ValueError, match="tries=0"):
        C.measure_until_decided(SCENARIOS, None, tries=0)


def test_faster_check_fails_when_local_sgd_is_not_faster():
    table = pd.DataFrame(
        {
            "check": ["local", "sync"],
            "real_s": [0.07, 0.06],
            "verdict": ["agrees", "agrees"],
        }
    )
    with pytest.raises(AssertionError, match="not faster"):
        C.check_faster(table, "local", "sync", say=lambda _: None)
    assert C.check_faster(table, "sync", "local", say=lambda _: None)
    said = []
    busy = table.assign(verdict=["busy", "agrees"])
    assert not C.check_faster(busy, "local", "sync", say=said.append)
    assert "undecided" in said[0]


def test_lateness_is_the_latest_rank_beyond_its_drawn_compute():
    draws = np.array([[0.10, 0.10], [0.10, 0.20]])  # (steps, ranks)
    recs = [
        {"start": 0.0, "arrive": [0.101, 0.301], "end": [0.20, 0.40]},
        {"start": 0.0, "arrive": [0.103, 0.405], "end": [0.20, 0.40]},
    ]
    assert _lateness(recs, draws, 1) == pytest.approx([0.003, 0.005])
    # Local SGD over both steps: one round, the draws summed.
    one = [{"start": 0.0, "arrive": [0.21], "end": [0.3]}] * 2
    assert _lateness(one, draws, 2) == pytest.approx([0.01])
