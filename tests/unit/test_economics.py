"""The economics model against hand-computed cases, and its invariants."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterlab.models import economics as eco

# A round case worked by hand: $35,040 over 4 years = $1.00 per hour of capital;
# 10% a year = $3,504 / 8,760 h = $0.40 per hour of operations; 1,000 W x 1.5 x
# $0.20/kWh = $0.30 per busy hour of power.
ROUND = dict(
    capex_per_gpu=35_040.0,
    lifetime_years=4.0,
    watts_per_gpu=1000.0,
    pue=1.5,
    price_per_kwh=0.20,
    ops_fraction_per_year=0.10,
)


def test_hourly_costs_of_the_round_case():
    cost = eco.onprem_hourly(**ROUND)
    assert cost["capital"] == pytest.approx(1.00)
    assert cost["operations"] == pytest.approx(0.40)
    assert cost["fixed"] == pytest.approx(1.40)
    assert cost["power"] == pytest.approx(0.30)


def test_breakeven_of_the_round_case():
    # 1.40 / (3.10 - 0.30) = 0.5: at $3.10 an hour, owning pays above 50% use.
    assert eco.breakeven_utilization(3.10, **ROUND) == pytest.approx(0.5)
    # At break-even an owned useful hour costs exactly the cloud price.
    assert eco.useful_hour_cost(0.5, **ROUND) == pytest.approx(3.10)


def test_useful_hour_cost_at_35_and_85_percent():
    assert eco.useful_hour_cost(0.35, **ROUND) == pytest.approx(1.40 / 0.35 + 0.30)
    assert eco.useful_hour_cost(0.85, **ROUND) == pytest.approx(1.40 / 0.85 + 0.30)


def test_a_cloud_price_below_the_power_bill_never_breaks_even():
    assert eco.breakeven_utilization(0.25, **ROUND) == math.inf


def test_the_defaults_give_a_breakeven_between_half_and_full_use_at_2_50():
    u = eco.breakeven_utilization(2.50)
    assert 0.5 < u < 1.0


def test_run_cost_follows_6nd():
    # 6 x 1e9 x 1e12 = 6e21 FLOP at 1e15 x 0.5 x 100 = 5e16 FLOP/s: 1.2e5 s.
    cost = eco.run_cost(1e9, 1e12, 100, 1e15, 0.5, 2.0)
    assert cost["seconds"] == pytest.approx(1.2e5)
    assert cost["gpu_hours"] == pytest.approx(1.2e5 / 3600 * 100)
    assert cost["dollars"] == pytest.approx(cost["gpu_hours"] * 2.0)


def test_io_bound_cost():
    # 1e15 bytes over 10 nodes at 1e9 B/s each: 1e5 s; 10 nodes x $3.6/h.
    cost = eco.io_bound_cost(1e15, 10, 1e9, 3.6)
    assert cost["seconds"] == pytest.approx(1e5)
    assert cost["dollars"] == pytest.approx(1e5 / 3600 * 10 * 3.6)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: eco.breakeven_utilization(-1.0), "cloud_price_per_gpu_hour"),
        (lambda: eco.breakeven_utilization(2.0, pue=0.5), "pue"),
        (lambda: eco.useful_hour_cost(0.0), "utilization"),
        (lambda: eco.useful_hour_cost(1.5), "utilization"),
        (lambda: eco.onprem_hourly(lifetime_years=0), "lifetime_years"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


prices = st.floats(0.01, 100.0)


@given(prices, prices)
def test_a_higher_cloud_price_never_raises_the_breakeven(p1, p2):
    low, high = sorted((p1, p2))
    assert eco.breakeven_utilization(high) <= eco.breakeven_utilization(low)


@given(st.floats(0.01, 1.0), st.floats(0.01, 1.0))
def test_more_utilisation_never_raises_the_cost_of_a_useful_hour(u1, u2):
    low, high = sorted((u1, u2))
    assert eco.useful_hour_cost(high) <= eco.useful_hour_cost(low)


@given(st.floats(1.0, 20.0), st.floats(1.0, 20.0))
def test_a_longer_lifetime_never_raises_the_breakeven(y1, y2):
    short, long = sorted((y1, y2))
    assert eco.breakeven_utilization(
        3.0, lifetime_years=long
    ) <= eco.breakeven_utilization(3.0, lifetime_years=short)


def test_the_exercise_check_passes_the_solution_and_catches_a_wrong_one(capsys):
    import clusterlab as cl

    assert cl.check.price_for_breakeven(cl.solutions.price_for_breakeven) is True

    def stub(target_u, **onprem):
        raise NotImplementedError

    assert cl.check.price_for_breakeven(stub) is False
    assert "not attempted" in capsys.readouterr().out

    def forgets_power(target_u, **onprem):
        return eco.onprem_hourly(**onprem)["fixed"] / target_u

    with pytest.raises(AssertionError, match="fixed / u \\+ power"):
        cl.check.price_for_breakeven(forgets_power)
