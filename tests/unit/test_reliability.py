"""Checkpointing and failure-detection closed forms, and their documented names."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import clusterlab as cl
from clusterlab.core.units import DAY_S
from clusterlab.core.units import HOUR_S as HOUR
from clusterlab.models import checkpointing as R
from clusterlab.models import failures as MF


def test_job_mtbf_divides_by_the_number_of_parts():
    assert R.job_mtbf(50_000 * HOUR, 1024) == pytest.approx(48.828125 * HOUR)
    # Llama 3: 16,384 GPUs and about 3.1 h between interruptions
    assert R.job_mtbf(50_700 * HOUR, 16_384) / HOUR == pytest.approx(3.09, abs=0.01)


def test_young_interval_by_hand():
    # sqrt(2 * 60 s * 10,800 s) = sqrt(1,296,000) = 1138.4 s
    assert R.young_daly_interval(60.0, 10_800.0) == pytest.approx(1138.42, abs=0.01)
    assert R.young_daly_interval(50.0, 1.0e4) == pytest.approx(1000.0)


def test_daly_interval_by_hand_and_its_limit():
    # x = C / 2M = 0.01: sqrt(2CM) (1 + 0.1/3 + 0.01/9) - C
    c, m = 100.0, 5000.0
    want = 1000.0 * (1 + 0.1 / 3 + 0.01 / 9) - 100.0
    assert R.daly_interval(c, m) == pytest.approx(want)
    assert R.daly_interval(300.0, 100.0) == 100.0  # C >= 2M: checkpoint every MTBF


def test_goodput_by_hand():
    # tau = 1000, C = 0, R = 0, M = 1000: 1000 / (1000 (e - 1)) = 1 / (e - 1)
    assert R.goodput(1000.0, 0.0, 1000.0) == pytest.approx(1 / (math.e - 1))
    # no failures in sight: only the checkpoint costs, tau / (tau + C)
    assert R.goodput(100.0, 25.0, 1e12) == pytest.approx(0.8, rel=1e-6)
    # a restart multiplies the time per segment by exp(R / M)
    g0, g1 = R.goodput(500.0, 10.0, 3000.0), R.goodput(500.0, 10.0, 3000.0, 300.0)
    assert g1 == pytest.approx(g0 * math.exp(-0.1))


def test_goodput_first_order_matches_the_exact_form_when_failures_are_rare():
    tau, c, m = 1000.0, 10.0, 1e6
    assert R.goodput_first_order(tau, c, m) == pytest.approx(
        R.goodput(tau, c, m), abs=2e-4
    )


def test_daly_interval_is_the_exact_optimum_and_young_is_close():
    for c, m in [(60.0, 48.8 * HOUR), (600.0, 3 * HOUR), (10.0, 1000.0)]:
        best = R.optimal_interval(c, m, restart_s=120.0)
        assert R.daly_interval(c, m) == pytest.approx(best, rel=0.01)
        assert R.young_daly_interval(c, m) == pytest.approx(best, rel=0.25)


@settings(max_examples=60, deadline=None)
@given(
    tau=st.floats(1.0, 1e6),
    c=st.floats(0.0, 1e4),
    m=st.floats(10.0, 1e8),
    r=st.floats(0.0, 1e4),
)
def test_goodput_is_a_fraction_and_falls_as_failures_come_sooner(tau, c, m, r):
    g = R.goodput(tau, c, m, r)
    assert 0.0 <= g <= 1.0
    assert R.goodput(tau, c, m / 2, r) <= g + 1e-12
    assert R.goodput(tau, c + 1.0, m, r) <= g + 1e-12  # dearer checkpoints never help


@settings(max_examples=40, deadline=None)
@given(c=st.floats(1.0, 1e3), m=st.floats(1e3, 1e7))
def test_young_interval_minimises_the_first_order_waste(c, m):
    tau = R.young_daly_interval(c, m)
    waste = cl.checkpointing.answer.checkpoint_waste
    assert waste(tau, c, m) <= waste(tau * 1.1, c, m)
    assert waste(tau, c, m) <= waste(tau / 1.1, c, m)


def test_heartbeat_closed_forms_by_hand():
    # no jitter, no loss: gaps are exactly one interval, so T > interval never alarms
    assert MF.heartbeat_false_alarm_rate(1.5, 1.0, 0.0, 0.0) == 0.0
    assert MF.heartbeat_false_alarm_rate(0.5, 1.0, 0.0, 0.0) == pytest.approx(1.0)
    # one heartbeat in ten lost, no jitter, 1 < T < 2: alarms after each loss
    assert MF.heartbeat_false_alarm_rate(1.5, 1.0, 0.0, 0.1) == pytest.approx(0.9 * 0.1)
    td = MF.heartbeat_detection_time(2.0, 1.0, 0.01, 0.1, 0.0)
    assert td == pytest.approx(2.0 + 0.11 - 0.5)
    rates = MF.heartbeat_false_alarm_rate(np.array([1.2, 2.0, 3.0]), 1.0, 0.1, 0.01)
    assert np.all(np.diff(rates) < 0)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: R.young_daly_interval(0.0, 10.0), "checkpoint_cost_s=0.0"),
        (lambda: R.young_daly_interval(10.0, -1.0), "mtbf_s=-1.0"),
        (lambda: R.job_mtbf(10.0, 0), "n_parts=0"),
        (lambda: R.goodput(0.0, 1.0, 10.0), "interval_s"),
        (lambda: R.goodput(10.0, -1.0, 10.0), "checkpoint_cost_s"),
        (lambda: MF.heartbeat_false_alarm_rate(1.0, 1.0, 0.1, 1.0), "loss=1.0"),
    ],
)
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_the_waste_check_accepts_the_solution_and_rejects_wrong_answers(capsys):
    assert (
        cl.checkpointing.check.checkpoint_waste(
            cl.checkpointing.answer.checkpoint_waste
        )
        is True
    )
    assert "\u2714" in capsys.readouterr().out

    def stub(tau, c, m):
        raise NotImplementedError

    assert cl.checkpointing.check.checkpoint_waste(stub) is False
    assert "not attempted" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="halfway"):
        cl.checkpointing.check.checkpoint_waste(lambda tau, c, m: c / tau + tau / m)
    with pytest.raises(AssertionError, match="C / tau"):
        cl.checkpointing.check.checkpoint_waste(lambda tau, c, m: tau / (2 * m))


def test_observed_mtbf_and_the_part_mtbf_it_implies():
    # Llama 3: 419 unexpected interruptions in 54 days on 16,384 GPUs
    m = R.mtbf_from_count(54 * DAY_S, 419)
    assert m == pytest.approx(11_135.08, abs=0.01)  # not 3.1 h = 11,160 s
    assert R.part_mtbf(m, 16_384) / HOUR == pytest.approx(50_677, abs=1)
    assert R.job_mtbf(R.part_mtbf(m, 16_384), 16_384) == pytest.approx(m)


def test_the_published_row_gives_the_llama3_interval():
    row = cl.published.row("failures_published", run="Llama 3 405B pre-training")
    assert row["duration_s"] == 54 * DAY_S
    m = R.mtbf_from_count(row["duration_s"], row["unexpected_interruptions"])
    assert m / HOUR == pytest.approx(3.093, abs=1e-3)


def test_checkpoint_cost_for_goodput_reaches_the_target_and_no_more():
    m = 11_135.0
    c = R.checkpoint_cost_for_goodput(0.9, m)
    best = R.goodput(R.optimal_interval(c, m), c, m)
    assert best == pytest.approx(0.9, abs=1e-6)
    assert R.goodput(R.optimal_interval(1.01 * c, m), 1.01 * c, m) < 0.9
    with pytest.raises(ValueError, match="out of reach"):
        R.checkpoint_cost_for_goodput(0.9, m, restart_s=0.2 * m)


@given(st.floats(1.0, 600.0), st.floats(1e3, 1e7), st.floats(1.5, 100.0))
@settings(max_examples=50, deadline=None)
def test_a_k_fold_cheaper_checkpoint_shrinks_interval_and_waste_sqrt_k_fold(c, m, k):
    tau, tau_k = R.young_daly_interval(c, m), R.young_daly_interval(c / k, m)
    assert tau / tau_k == pytest.approx(math.sqrt(k))
    waste = cl.checkpointing.answer.checkpoint_waste
    assert waste(tau, c, m) / waste(tau_k, c / k, m) == pytest.approx(math.sqrt(k))


def test_each_formula_lives_in_its_topic_module():
    from clusterlab.checkpointing import sim as checkpointing
    from clusterlab.failures import sim as failures

    assert cl.models.checkpointing.goodput is R.goodput
    assert callable(failures.simulate) and callable(checkpointing.simulate)
    with pytest.raises(ImportError):  # the old alias module is gone
        import clusterlab.models.reliability  # noqa: F401
