"""The scheduler's SimPy twin, and the check that holds it to the engine."""

from __future__ import annotations

import pandas as pd
import pytest

from clusterlab.serving import chart, check, measure
from clusterlab.serving.sim import Workload, simulate, summarise

COST = dict(fixed_s=0.004, per_request_s=0.001)


def test_one_request_alone_waits_one_step_for_its_first_token():
    df = simulate(Workload(n=1, new_tokens=5), "continuous", **COST)
    assert df.ttft_s.iloc[0] == pytest.approx(0.005)
    assert df.tpot_s.iloc[0] == pytest.approx(0.005)


@pytest.mark.parametrize("rate", [20.0, 150.0])
def test_static_batching_never_answers_first(rate):
    w = Workload(n=40, rate_per_s=rate, new_tokens=8, seed=1)
    cont = summarise(simulate(w, "continuous", **COST))
    stat = summarise(simulate(w, "static", **COST))
    assert stat["ttft_s"] >= cont["ttft_s"]


def test_the_gap_grows_with_the_rate_until_the_server_is_overloaded():
    """Light load: no batch in progress to wait for. Overload: both queue."""
    ratios = []
    for rate in (5.0, 60.0, 300.0):
        w = Workload(n=60, rate_per_s=rate, new_tokens=8, seed=2)
        s = summarise(simulate(w, "static", **COST))["ttft_s"]
        c = summarise(simulate(w, "continuous", **COST))["ttft_s"]
        ratios.append(s / c)
    assert ratios[1] > ratios[0] * 1.5
    assert ratios[2] < ratios[1]


def test_a_batch_of_one_makes_the_policies_equal():
    w = Workload(n=20, rate_per_s=100.0, seed=3)
    a = simulate(w, "static", max_batch=1, **COST)
    b = simulate(w, "continuous", max_batch=1, **COST)
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        (dict(policy="fifo"), "policy"),
        (dict(max_batch=0), "max_batch"),
        (dict(fixed_s=-1.0), "fixed_s"),
    ],
)
def test_bad_inputs_are_named(kwargs, needle):
    args = dict(policy="static", **COST) | kwargs
    with pytest.raises(ValueError, match=needle):
        simulate(Workload(n=3), **args)


def test_a_bad_rate_is_named():
    with pytest.raises(ValueError, match="rate_per_s"):
        simulate(Workload(n=3, rate_per_s=0.0), "static", **COST)


def _table(engine_ratio, twin_ratio, rates=(20.0, 60.0, 150.0)):
    rows = []
    for rate in rates:
        for source, ratio in (("engine", engine_ratio), ("twin", twin_ratio)):
            rows.append(
                dict(rate_per_s=rate, policy="continuous", source=source, ttft_s=0.01)
            )
            rows.append(
                dict(
                    rate_per_s=rate, policy="static", source=source, ttft_s=0.01 * ratio
                )
            )
    return pd.DataFrame(rows)


def test_the_check_passes_a_twin_that_sees_the_policy():
    ok, text = check.batching_twin_agrees(_table(2.5, 2.2))
    assert ok is True and "2.5x measured" in text


def test_the_check_fails_a_twin_blind_to_the_policy():
    ok, text = check.batching_twin_agrees(_table(2.5, 1.0))
    assert ok is False and "not within" in text


def test_the_check_fails_when_static_batching_costs_nothing():
    ok, text = check.batching_twin_agrees(_table(1.0, 1.0))
    assert ok is False and "barely differ" in text


def test_one_rate_where_both_policies_saturated_does_not_fail_the_gain():
    table = _table(2.5, 2.2)
    top = (table.rate_per_s == 150.0) & (table.policy == "static")
    table.loc[top, "ttft_s"] = 0.01  # a loaded machine: both queue alike at 150/s
    table.loc[top & (table.source == "twin"), "ttft_s"] = 0.012
    assert check.batching_twin_agrees(table)[0] is True


def test_the_chart_draws_both_sources():
    spec = chart.batching_chart(_table(2.5, 2.2)).to_dict()
    assert len(spec["layer"]) >= 2


def _client(ttfts_client, ttfts_twin, rates=(20.0, 200.0, 600.0)):
    rows = []
    for rate, c, t in zip(rates, ttfts_client, ttfts_twin, strict=True):
        rows.append(dict(rate_per_s=rate, source="client", ttft_s=c))
        rows.append(dict(rate_per_s=rate, source="twin", ttft_s=t))
    return pd.DataFrame(rows)


def test_the_client_check_passes_a_twin_that_queues():
    ok, text = check.client_twin_agrees(
        _client([0.006, 0.012, 0.075], [0.006, 0.01, 0.047])
    )
    assert ok is True and "ms seen" in text


def test_the_client_check_fails_a_twin_without_queueing():
    ok, text = check.client_twin_agrees(_client([0.006, 0.012, 0.075], [0.006] * 3))
    assert ok is False and "600 requests/s" in text


def test_the_client_check_fails_a_load_that_never_saturates():
    ok, text = check.client_twin_agrees(_client([0.006, 0.006, 0.007], [0.006] * 3))
    assert ok is False and "never saturated" in text


def test_the_step_cost_is_a_line_through_the_median_steps():
    from clusterlab.serving.load import fit_step_cost

    steps = pd.DataFrame(
        [(1, 0.003), (1, 0.0031), (1, 0.5), (4, 0.006), (8, 0.010)],
        columns=["batch", "step_s"],
    )
    cost = fit_step_cost(steps)
    assert cost["per_request_s"] == pytest.approx(0.001, rel=0.1)
    assert cost["fixed_s"] == pytest.approx(0.002, rel=0.2)


def test_the_client_chart_draws_client_and_twin():
    spec = chart.client_chart(_client([0.006, 0.012, 0.075], [0.006, 0.01, 0.047]))
    assert len(spec.to_dict()["layer"]) == 2


def test_a_miss_in_a_run_with_slowed_steps_is_busy_not_passed():
    table = _table(2.5, 1.0).assign(slow_share=0.3)
    verdict, text = check.batching_twin_agrees(table)
    assert verdict == "busy" and "something else had the cores" in text


def test_a_miss_in_a_quiet_run_stays_a_miss():
    table = _table(2.5, 1.0).assign(slow_share=0.02)
    assert check.batching_twin_agrees(table)[0] is False


def test_a_busy_run_that_agrees_still_passes():
    table = _table(2.5, 2.2).assign(slow_share=0.5)
    assert check.batching_twin_agrees(table)[0] is True


def test_slowed_steps_are_counted_against_their_cost():
    from clusterlab.serving.measure import slow_share

    steps = [(1, 0.002), (1, 0.0021), (8, 0.009), (8, 0.05)]
    assert slow_share(steps, fixed_s=0.001, per_request_s=0.001) == 0.25
    assert slow_share([], fixed_s=0.001, per_request_s=0.001) == 0.0


def test_the_batch_trace_shows_static_batching_making_newcomers_wait():
    from clusterlab.serving import diagram, measure

    cont = measure.batch_trace("continuous")
    stat = measure.batch_trace("static")
    waits = {
        name: (t.phase == "waiting").sum() for name, t in (("c", cont), ("s", stat))
    }
    assert waits["s"] > 2 * waits["c"]
    # every request gets one prefill step and as many decode steps as asked
    for t in (cont, stat):
        assert (t[t.phase == "prefill"].groupby("request").size() == 1).all()
    # while a batch runs under static batching, no request joins it
    firsts = stat[stat.phase == "prefill"].step
    assert firsts.nunique() < len(firsts)
    spec = diagram.batch_diagram(pd.concat([cont, stat])).to_dict()
    assert spec["facet"]["row"]["field"] == "policy"


def test_a_bad_policy_is_named_in_the_trace():
    from clusterlab.serving import measure

    with pytest.raises(ValueError, match="policy"):
        measure.batch_trace("fifo")


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [({"rates": [0.0]}, "rates"), ({"repeats": 0}, "repeats"), ({"n": 1}, "n=")],
)
def test_the_table_names_a_bad_argument_before_serving(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        measure.batching_table(None, **kwargs)
