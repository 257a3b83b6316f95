"""The economics model against hand-computed cases, and its invariants."""

import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import clusterlab as cl
import widget_helpers as wh
from clusterlab.models import economics as eco

# A round case worked by hand: $35,040 over 4 years = $1.00 per hour of capital;
# 10% a year = $3,504 / 8,760 h = $0.40 per hour of operations; 1,000 W x 1.5 x
# $0.20/kWh = $0.30 per busy hour of power. No idle draw, fabric, storage or
# facility, so the old two-term model is the special case.
ROUND = dict(
    capex_per_gpu=35_040.0,
    fabric_per_gpu=0.0,
    storage_per_gpu=0.0,
    facility_per_kw=0.0,
    idle_watts_per_gpu=0.0,
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


def test_idle_power_is_paid_every_hour_with_pue():
    # 400 W idle x 1.5 x $0.20/kWh = $0.12 every hour; busy adds 600 W: $0.18.
    cost = eco.onprem_hourly(**{**ROUND, "idle_watts_per_gpu": 400.0})
    assert cost["idle_power"] == pytest.approx(0.12)
    assert cost["fixed"] == pytest.approx(1.52)
    assert cost["power"] == pytest.approx(0.18)
    assert cost["busy_power"] == pytest.approx(0.30)


@given(st.floats(0.05, 1.0), st.floats(1.0, 1000.0))
@example(1.0, 930.0)  # equal costs at full use, one rounding step apart
def test_idle_power_raises_the_cost_of_a_useful_hour(u, idle_w):
    idle = {**ROUND, "idle_watts_per_gpu": idle_w}
    base = eco.useful_hour_cost(u, **ROUND)
    assert eco.useful_hour_cost(u, **idle) >= base * (1 - 1e-12)
    # at full use the idle draw costs nothing extra: busy draw is the same
    assert eco.useful_hour_cost(1.0, **idle) == pytest.approx(
        eco.useful_hour_cost(1.0, **ROUND)
    )
    assert eco.breakeven_utilization(3.1, **idle) >= eco.breakeven_utilization(
        3.1, **ROUND
    )


def test_fabric_storage_and_facility_are_explicit_terms():
    # $35,040 of fabric doubles the IT purchase: capital and operations double.
    cost = eco.onprem_hourly(**{**ROUND, "fabric_per_gpu": 35_040.0})
    assert cost["capital"] == pytest.approx(2.00)
    assert cost["operations"] == pytest.approx(0.80)
    # $13,140 per kW over 15 years for 1 kW: $0.10 per hour of facility
    fac = eco.onprem_hourly(
        **{**ROUND, "facility_per_kw": 13_140.0, "facility_lifetime_years": 15.0}
    )
    assert fac["facility"] == pytest.approx(0.10)
    assert fac["fixed"] == pytest.approx(1.50)


def test_idle_draw_above_busy_draw_is_refused():
    with pytest.raises(ValueError, match="idle_watts_per_gpu"):
        eco.onprem_hourly(watts_per_gpu=500.0, idle_watts_per_gpu=600.0)


def test_every_default_comes_from_a_data_row():
    src = eco.default_sources()
    assert set(src["input"]) == set(eco.DEFAULTS)
    assert src["source"].str.len().gt(10).all()
    pub = cl.published
    assert (
        eco.DEFAULTS["capex_per_gpu"]
        == pub.value("prices", "usd", item="hgx_h100_node") / 8
    )
    assert (
        eco.DEFAULTS["watts_per_gpu"]
        == pub.value("power", "W", item="dgx_h100_max") / 8
    )
    assert eco.DEFAULTS["pue"] == pub.value("power", "pue", item="pue_new_build")


def test_e3_breakeven_is_recomputed_from_the_price_rows():
    """E3's "about 50%": the price at which it holds is 2 x fixed + power."""
    cost = eco.onprem_hourly()
    at_half = 2 * cost["fixed"] + cost["power"]
    assert eco.breakeven_utilization(at_half) == pytest.approx(0.5)
    prices = eco.cloud_prices().set_index("item")["usd"]
    u = {k: eco.breakeven_utilization(p) for k, p in prices.items()}
    # the cheapest listings never pay back; the hyperscaler's pays back early
    assert u["h100_listings_low"] > 1.0
    assert u["h100_sxm_aws_p5"] < 0.5
    assert u[eco.REFERENCE_ON_DEMAND] == pytest.approx(
        cost["fixed"] / (prices[eco.REFERENCE_ON_DEMAND] - cost["power"])
    )


def test_a_cloud_price_row_must_exist():
    with pytest.raises(ValueError, match="item='nope'"):
        eco.cloud_price("nope")


def test_run_cost_follows_6nd():
    # 6 x 1e9 x 1e12 = 6e21 FLOP at 1e15 x 0.5 x 100 = 5e16 FLOP/s: 1.2e5 s.
    cost = eco.run_cost(1e9, 1e12, 100, 1e15, 0.5, 2.0)
    assert cost["seconds"] == pytest.approx(1.2e5)
    assert cost["gpu_hours"] == pytest.approx(1.2e5 / 3600 * 100)
    assert cost["dollars"] == pytest.approx(cost["gpu_hours"] * 2.0)


def test_io_bound_cost():
    # 1e15 bytes over 10 nodes at 1e9 B/s each: 1e5 s; 10 nodes x $3.6/h.
    cost = cl.models.io_budget.io_bound_cost(1e15, 10, 1e9, 3.6)
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


def test_sweeps_live_in_the_model_and_the_charts_check_their_columns():
    import pandas as pd

    bt = cl.models.breakeven
    table = bt.breakeven_table([2.0, 4.0], [3, 5])
    assert list(table.columns) == ["cloud_price", "lifetime_years", "breakeven"]
    assert len(table) == 4
    curve = bt.useful_hour_table(3.0, [0.5, 1.0])
    assert curve["owned"].iloc[1] == pytest.approx(eco.useful_hour_cost(1.0))
    v = cl.economics.chart
    assert "layer" in v.breakeven_sweep_chart(table).to_dict()
    assert "layer" in v.useful_hour_curve(curve).to_dict()
    assert v.useful_hour_chart(curve).to_dict()["mark"]["type"] == "bar"
    explorer = v.breakeven_explorer(bt.explorer_inputs(3.0)).to_dict()
    assert {p["name"] for p in explorer["params"]} >= {"cloud_price", "capex"}
    assert "bar" in str(
        v.capex_chart(cl.models.cluster_capex.e1_capex_table()).to_dict()
    )
    for build in (v.breakeven_sweep_chart, v.useful_hour_curve, v.capex_chart):
        with pytest.raises(ValueError, match="lacks the column"):
            build(pd.DataFrame({"x": [1]}))


def test_the_widget_starts_at_the_reference_price():
    box = cl.economics.widget.economics_explorer()
    assert wh.control(box, "cloud $/GPU-h").value == pytest.approx(eco.cloud_price())
    before = wh.text(box)
    wh.control(box, "utilisation").value = 1.0
    assert "break-even" in wh.text(box) and wh.text(box) != before


def test_the_exercise_check_passes_the_solution_and_catches_a_wrong_one(capsys):
    import clusterlab as cl

    assert (
        cl.economics.check.price_for_breakeven(cl.economics.answer.price_for_breakeven)
        is True
    )

    def stub(target_u, **onprem):
        raise NotImplementedError

    assert cl.economics.check.price_for_breakeven(stub) is False
    assert "not attempted" in capsys.readouterr().out

    def forgets_power(target_u, **onprem):
        return eco.onprem_hourly(**onprem)["fixed"] / target_u

    with pytest.raises(AssertionError, match="fixed / u \\+ power"):
        cl.economics.check.price_for_breakeven(forgets_power)


# --- the break-even formula against a lifetime ledger -----------------------------


def test_the_breakeven_matches_a_lifetime_ledger(capsys):
    assert (
        cl.economics.check.breakeven_ledger_backtest(eco.breakeven_utilization) is True
    )
    assert "lifetime ledger at 8 prices" in capsys.readouterr().out
    ledger = cl.models.breakeven.lifetime_ledger(0.5)
    parts = ("purchase", "operations", "facility", "electricity")
    assert sum(ledger[k] for k in parts) == pytest.approx(ledger["total"])
    assert cl.models.breakeven.lifetime_ledger(0.0)["per_useful_hour"] == math.inf
    assert cl.models.breakeven.ledger_breakeven(1.90) == math.inf


@pytest.mark.parametrize(
    "wrong",
    [
        {"idle_watts_per_gpu": 0.0},  # idle power forgotten
        {"pue": 1.0},  # the PUE left out
        {"lifetime_years": 5.0},  # a different write-off than the ledger's
    ],
)
def test_the_ledger_backtest_fails_when_the_model_drops_a_term(wrong):
    def mutated(price):
        return eco.breakeven_utilization(price, **wrong)

    with pytest.raises(AssertionError, match="lifetime ledger"):
        cl.economics.check.breakeven_ledger_backtest(mutated)


def test_the_ledger_backtest_fails_when_power_is_left_out_of_the_margin():
    def no_power(price):
        return eco.onprem_hourly()["fixed"] / price

    with pytest.raises(AssertionError, match="ledger"):
        cl.economics.check.breakeven_ledger_backtest(no_power)
    with pytest.raises(ValueError, match="utilization"):
        cl.models.breakeven.lifetime_ledger(1.5)


# --- W5: what a GPU gains on a measured pipeline -----------------------------------


def test_a_measured_pipeline_gains_little_on_a_gpu():
    pre = cl.roofline.workloads.measure_traits(["data preprocessing"])
    assert cl.economics.check.pipeline_gpu_gain(pre) < 1.5


def test_the_pipeline_check_fails_when_the_pipeline_is_measured_dense():
    pre = cl.roofline.workloads.measure_traits(["data preprocessing"])
    dense = pre.assign(
        dense_fraction=1.0,
        io_fraction=0.0,
        branch_fraction=0.0,
        branching=False,
        intensity=100.0,
    )
    with pytest.raises(AssertionError, match="faster"):
        cl.economics.check.pipeline_gpu_gain(dense)
    with pytest.raises(ValueError, match="no row"):
        cl.economics.check.pipeline_gpu_gain(pre, name="web crawler")
