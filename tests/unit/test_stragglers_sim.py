"""The straggler simulations: two engines, the closed form, invariants, charts, UI."""

import time

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import clusterlab as cl
import widget_helpers as wh

S = cl.stragglers.sim
M = cl.models.stragglers

SHARED = [
    S.StragglerParams(),
    S.StragglerParams(n_workers=64, jitter="exponential", cv=0.4, backup_workers=3),
    S.StragglerParams(jitter="lognormal", cv=0.5, sync_period=4, allreduce_s=0.01),
    S.StragglerParams(slow_workers=2, slow_factor=1.5, backup_workers=1, sync_period=3),
    S.StragglerParams(n_workers=4, jitter="none", cv=0.0, slow_workers=1),
]


@pytest.mark.parametrize("params", SHARED, ids=range(len(SHARED)))
def test_simpy_and_numpy_engines_agree_round_by_round(params):
    a = S.simulate(params, seed=5, engine="simpy")
    b = S.simulate(params, seed=5, engine="numpy")
    numeric = [c for c in S.COLUMNS if c != "engine"]
    np.testing.assert_allclose(a[numeric], b[numeric], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("params", SHARED, ids=range(len(SHARED)))
def test_engines_agree_within_two_percent_on_different_draws(params):
    params = S.StragglerParams(**{**params.__dict__, "n_steps": 1200})
    a = S.mean_step_time(S.simulate(params, seed=1, engine="simpy"))
    b = S.mean_step_time(S.simulate(params, seed=2, engine="numpy"))
    assert a == pytest.approx(b, rel=0.02)


@pytest.mark.parametrize(
    "params",
    [
        S.StragglerParams(n_workers=1024, n_steps=1000),
        S.StragglerParams(n_workers=2, n_steps=4000, cv=0.3),
        S.StragglerParams(n_workers=256, n_steps=1000, jitter="lognormal", cv=0.4),
        S.StragglerParams(n_workers=128, n_steps=1000, jitter="exponential", cv=0.5),
        S.StragglerParams(n_workers=100, n_steps=1000, backup_workers=5),
        S.StragglerParams(n_workers=64, n_steps=1000, slow_workers=1, slow_factor=1.2),
        S.StragglerParams(n_workers=512, n_steps=2000, sync_period=8, cv=0.3),
    ],
    ids=lambda p: f"N{p.n_workers}-{p.jitter}",
)
def test_numpy_mean_matches_the_closed_form(params):
    sim = S.mean_step_time(S.simulate(params, seed=11))
    assert sim == pytest.approx(M.expected_step_time(**params.model_kwargs()), rel=0.02)


def test_numpy_engine_simulates_1024_workers_for_1000_steps_in_under_a_second():
    params = S.StragglerParams(n_workers=1024, n_steps=1000)
    best = min(_timed(lambda: S.simulate(params, seed=0)) for _ in range(3))
    assert best < 1.0, f"{best:.3f} s"


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 64),
    jitter=st.sampled_from(M.JITTERS),
    cv=st.floats(0.0, 1.0),
    eps=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**16),
)
def test_slowing_one_worker_by_eps_costs_each_round_at_most_eps(
    n, jitter, cv, eps, seed
):
    fair = S.StragglerParams(n_workers=n, n_steps=20, jitter=jitter, cv=cv)
    slow = S.StragglerParams(
        n_workers=n,
        n_steps=20,
        jitter=jitter,
        cv=cv,
        slow_workers=1,
        slow_factor=1 + eps,
    )
    a = S.simulate(fair, seed)["round_s"].to_numpy()
    b = S.simulate(slow, seed)["round_s"].to_numpy()
    assert np.all(b >= a - 1e-12) and np.all(b <= a * (1 + eps) + 1e-12)


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(2, 32),
    backups=st.integers(0, 31),
    period=st.integers(1, 8),
    seed=st.integers(0, 1000),
)
def test_invariants(n, backups, period, seed):
    p = S.StragglerParams(
        n_workers=n,
        n_steps=30,
        jitter="exponential",
        cv=0.5,
        backup_workers=min(backups, n - 1),
        sync_period=period,
        allreduce_s=0.01,
    )
    df = S.simulate(p, seed)
    assert df["steps"].sum() == 30
    assert (df["step_s"] > 0).all() and df["end_s"].is_monotonic_increasing
    fractions = df["idle_frac"] + df["wasted_frac"]
    assert df["idle_frac"].ge(0).all() and fractions.le(1 + 1e-12).all()
    no_backups = S.simulate(
        S.StragglerParams(**{**p.__dict__, "backup_workers": 0}), seed
    )
    assert (df["round_s"] <= no_backups["round_s"] + 1e-12).all()


def test_draws_have_the_stated_mean_spread_and_slow_columns():
    p = S.StragglerParams(n_workers=8, n_steps=20_000, cv=0.2, slow_workers=2)
    p = S.StragglerParams(**{**p.__dict__, "slow_factor": 2.0})
    for jitter in ("normal", "lognormal", "exponential"):
        d = S.draw_compute_times(S.StragglerParams(**{**p.__dict__, "jitter": jitter}))
        fast = d[:, :6]
        assert fast.mean() == pytest.approx(0.1, rel=0.01)
        assert fast.std() == pytest.approx(0.02, rel=0.03)
        assert d[:, 6:].mean() == pytest.approx(0.2, rel=0.01)
    rng = np.random.default_rng(4)
    assert S.draw_compute_times(p, rng).shape == (20_000, 8)


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="backup_workers=4"):
        S.StragglerParams(n_workers=4, backup_workers=4)
    with pytest.raises(ValueError, match="jitter='uniform'"):
        S.StragglerParams(jitter="uniform")
    with pytest.raises(ValueError, match="engine='des'"):
        S.simulate(S.StragglerParams(), engine="des")
    with pytest.raises(ValueError, match="params="):
        S.simulate({"n_workers": 4})
    with pytest.raises(ValueError, match="seed=-1"):
        S.simulate(S.StragglerParams(), seed=-1)
    with pytest.raises(ValueError, match="round_s"):
        S.mean_step_time(pd.DataFrame({"steps": [1]}))


def test_charts_carry_titles_axes_and_bound_controls():
    sweep = M.step_time_sweep((1, 32, 1024), ("normal", "exponential"), (0.05, 0.1))
    spec = cl.stragglers.chart.straggler_sweep_chart(sweep).to_dict()
    bound = [p for p in spec["params"] if "bind" in p]
    assert {p["name"] for p in bound} == {"jitter_pick", "cv_pick", "slow_pick"}
    assert spec["encoding"]["y"]["title"] == "step time / mean compute time"
    growth = cl.stragglers.chart.straggler_growth_chart(
        M.max_growth_table((1, 2, 4))
    ).to_dict()
    assert "standard deviations" in growth["encoding"]["y"]["title"]
    model, sim = cl.stragglers.widget.straggler_curves(
        dict(
            jitter="normal",
            cv=0.1,
            slow_workers=1,
            slow_factor=1.5,
            mitigation="backup workers",
            amount=2,
        ),
        n_values=(1, 8, 64),
        n_steps=50,
    )
    assert set(model["series"]) == {"no mitigation", "backup workers (2)"}
    assert "layer" in cl.stragglers.chart.straggler_scaling_chart(model, sim).to_dict()
    rounds = S.simulate(S.StragglerParams(n_steps=5)).assign(scenario="a")
    assert "facet" in cl.stragglers.chart.straggler_rounds_chart(rounds).to_dict()
    dots = pd.DataFrame({"scenario": ["a"], "source": ["model"], "step_s": [0.1]})
    assert (
        cl.stragglers.chart.straggler_compare_chart(dots).to_dict()["mark"]["type"]
        == "point"
    )
    with pytest.raises(ValueError, match="lacks the column"):
        cl.stragglers.chart.straggler_sweep_chart(pd.DataFrame({"n_workers": [1]}))


def test_the_widget_updates_fast_and_says_what_it_shows():
    box = cl.stragglers.widget.straggler_explorer()
    cv = wh.control(box, "cv")
    best = min(_timed(lambda v=v: setattr(cv, "value", v)) for v in (0.2, 0.3, 0.25))
    assert best < 1.0, f"{best:.3f} s per update"  # 200 ms on an idle machine
    assert "N = 1024" in wh.text(box)
    wh.control(box, "mitigation").value = "backup workers"
    assert "backup workers (4)" in wh.text(box)
    with pytest.raises(ValueError, match="n_steps=5"):
        cl.stragglers.widget.straggler_explorer(n_steps=5)
