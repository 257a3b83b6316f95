"""The straggler model against order statistics, closed forms and its invariants."""

import functools
import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import clusterlab as cl

M = cl.models.stragglers
N_VALUES = [2, 3, 4, 5, 8, 16, 32, 64, 128, 256, 512, 1000, 1024]


@functools.lru_cache
def normal_max_sd(n: int) -> float:
    """E[max of n standard normals], by mpmath quadrature of the max's density."""

    def density(x):
        return x * n * mpmath.npdf(x) * mpmath.ncdf(x) ** (n - 1)

    return float(mpmath.quad(density, [-12, -2, 0, 1, 2, 3, 4, 5, 6, 12]))


@pytest.mark.parametrize("n", N_VALUES)
def test_normal_jitter_matches_numerical_order_statistics(n):
    base_s, cv = 0.25, 0.1
    step = M.expected_step_time(n, base_s, "normal", cv)
    excess_sd = (step - base_s) / (cv * base_s)
    assert excess_sd == pytest.approx(normal_max_sd(n), rel=0.005)
    # The step time itself, which the bound is about, is far closer.
    assert step == pytest.approx(base_s * (1 + cv * normal_max_sd(n)), rel=1e-4)


def test_small_n_closed_forms():
    # E[max of 2 and 3 standard normals]: 1/sqrt(pi) and 3/(2 sqrt(pi)).
    assert M.expected_step_time(2, 1.0, "normal", 0.1) == pytest.approx(
        1 + 0.1 / math.sqrt(math.pi), abs=1e-6
    )
    assert M.expected_step_time(3, 1.0, "normal", 0.1) == pytest.approx(
        1 + 0.15 / math.sqrt(math.pi), abs=1e-6
    )
    assert M.expected_step_time(1, 0.3, "lognormal", 0.5) == pytest.approx(0.3, 1e-4)


@pytest.mark.parametrize("n", [1, 2, 16, 1024])
def test_exponential_tail_gives_the_harmonic_number(n):
    harmonic = sum(1 / k for k in range(1, n + 1))
    got = M.expected_step_time(n, 1.0, "exponential", 0.4)
    assert got == pytest.approx(1 + 0.4 * (harmonic - 1), rel=1e-4)


def test_minimum_with_all_but_one_as_backups():
    # Waiting for the fastest 1 of N is the minimum: mean - sigma * e_N.
    got = M.expected_step_time(64, 1.0, "normal", 0.05, backup_workers=63)
    assert got == pytest.approx(1 - 0.05 * normal_max_sd(64), rel=1e-4)


def test_backups_and_slow_workers_against_monte_carlo():
    rng = np.random.default_rng(7)
    x = np.maximum(0, 1 + 0.1 * rng.standard_normal((100_000, 16)))
    x[:, -2:] *= 1.5
    x.sort(axis=1)
    for b in (0, 1, 2, 3):
        got = M.expected_step_time(16, 1.0, "normal", 0.1, 2, 1.5, backup_workers=b)
        assert got == pytest.approx(x[:, 15 - b].mean(), rel=0.003), b


def test_local_sgd_divides_the_jitter_term_by_sqrt_h():
    for h in (2, 4, 16):
        got = M.expected_step_time(1024, 1.0, "normal", 0.1, sync_period=h)
        assert got == pytest.approx(1 + 0.1 * normal_max_sd(1024) / math.sqrt(h), 2e-4)


def test_local_sgd_lognormal_against_monte_carlo():
    rng = np.random.default_rng(3)
    s = math.sqrt(math.log(2.0))  # cv = 1
    sums = rng.lognormal(-s * s / 2, s, (20_000, 4, 64)).sum(axis=1)
    got = M.expected_step_time(64, 1.0, "lognormal", 1.0, sync_period=4)
    assert got == pytest.approx(sums.max(axis=1).mean() / 4, rel=0.01)


def test_no_jitter_passes_a_fixed_slowdown_through_exactly():
    assert M.expected_step_time(1024, 2.0, "none", 0.0, 1, 1.003) == pytest.approx(
        2.006
    )
    assert M.expected_step_time(1024, 2.0, "none", 0.0, 3, 1.5, 3) == 2.0
    assert M.expected_step_time(8, 1.0, "normal", 0.1, allreduce_s=0.5) == (
        pytest.approx(M.expected_step_time(8, 1.0, "normal", 0.1) + 0.5)
    )


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 1024),
    jitter=st.sampled_from(M.JITTERS),
    cv=st.floats(0.0, 1.0),
    eps=st.floats(0.0, 0.5),
    backups=st.integers(0, 3),
)
def test_a_slowdown_of_one_worker_never_costs_more_than_itself(
    n, jitter, cv, eps, backups
):
    b = min(backups, n - 1)
    fair = M.expected_step_time(n, 1.0, jitter, cv, backup_workers=b)
    slowed = M.expected_step_time(n, 1.0, jitter, cv, 1, 1 + eps, backup_workers=b)
    cost = slowed / fair - 1
    assert -1e-6 <= cost <= eps + 1e-6


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 65536), cv=st.floats(0.001, 1.0))
def test_sqrt_2_ln_n_bounds_the_normal_maximum(n, cv):
    excess = (M.expected_step_time(n, 1.0, "normal", cv) - 1.0) / cv
    assert excess <= M.gaussian_max_asymptote(n) + 1e-6


def test_more_workers_never_shorten_the_step():
    for jitter in ("normal", "lognormal", "exponential"):
        times = [M.expected_step_time(n, 1.0, jitter, 0.3) for n in (1, 2, 8, 64, 512)]
        assert times == sorted(times), jitter


@pytest.mark.parametrize("jitter", ["normal", "lognormal", "exponential"])
def test_the_cv_that_gives_a_step_ratio_is_found(jitter):
    cv = M.jitter_cv_for_step_ratio(1024, 150 / 42, jitter)
    assert M.expected_step_time(1024, 1.0, jitter, cv) == pytest.approx(150 / 42, 1e-4)


def test_the_cdf_has_the_stated_mean_and_spread():
    t = np.linspace(0, 5, 200_001)
    for jitter in ("normal", "lognormal", "exponential"):
        cdf = M.compute_time_cdf(t, 1.0, jitter, 0.3)
        mean = np.trapezoid(1 - cdf, t)
        second = np.trapezoid(2 * t * (1 - cdf), t)
        assert mean == pytest.approx(1.0, abs=1e-3), jitter
        assert math.sqrt(second - mean**2) == pytest.approx(0.3, rel=0.01), jitter


def test_tables_for_the_charts():
    growth = M.max_growth_table((1, 4, 1024))
    assert set(growth["series"]) >= {"normal", "exponential"}
    normal = growth[growth["series"] == "normal"].set_index("n_workers")["excess_sd"]
    assert normal[1024] == pytest.approx(normal_max_sd(1024), rel=0.005)
    sweep = M.step_time_sweep((1, 64), ("normal",), (0.1,), (1.0, 1.5))
    assert len(sweep) == 2 * 2 * len(M.SWEEP_MITIGATIONS)
    assert (sweep["step_ratio"] > 0.5).all()
    assert sweep["throughput_loss"].between(-1, 1).all()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_workers": 0}, "n_workers=0"),
        ({"base_s": 0.0}, "base_s=0.0"),
        ({"jitter": "pareto"}, "jitter='pareto'"),
        ({"cv": 1.5}, "cv=1.5"),
        ({"slow_workers": 9}, "slow_workers=9"),
        ({"slow_factor": 0.5}, "slow_factor=0.5"),
        ({"backup_workers": 8}, "backup_workers=8"),
        ({"sync_period": 0}, "sync_period=0"),
        ({"allreduce_s": -1.0}, "allreduce_s=-1.0"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    args = {"n_workers": 8, "base_s": 1.0} | kwargs
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        M.expected_step_time(**args)


def test_an_unreachable_step_ratio_is_refused():
    with pytest.raises(ValueError, match="step_ratio=50"):
        M.jitter_cv_for_step_ratio(4, 50.0, "normal")


def test_the_exercise_check(capsys):
    assert (
        cl.stragglers.check.expected_max_of_n(cl.stragglers.answer.expected_max_of_n)
        is True
    )
    assert "\u2714 expected_max_of_n" in capsys.readouterr().out

    def stub(cdf, n, lo_s, hi_s):
        raise NotImplementedError

    assert cl.stragglers.check.expected_max_of_n(stub) is False
    assert "not attempted" in capsys.readouterr().out

    def mean_of_one(cdf, n, lo_s, hi_s):
        t = np.linspace(lo_s, hi_s, 5001)
        return lo_s + np.trapezoid(1 - cdf(t), t)

    with pytest.raises(AssertionError, match="mean of a single worker"):
        cl.stragglers.check.expected_max_of_n(mean_of_one)

    def forgot_lo(cdf, n, lo_s, hi_s):
        return cl.stragglers.answer.expected_max_of_n(cdf, n, lo_s, hi_s) - lo_s

    with pytest.raises(AssertionError, match="add lo_s"):
        cl.stragglers.check.expected_max_of_n(forgot_lo)
    with pytest.raises(ValueError, match="fn="):
        cl.stragglers.check.expected_max_of_n(None)
