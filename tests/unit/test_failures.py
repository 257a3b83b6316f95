"""Heartbeat detector and job-failure simulations, against each other and the models."""

import numpy as np
import pandas as pd
import pytest

import clusterlab as cl
from clusterlab.checkpointing import sim as jf
from clusterlab.failures import sim as hb
from clusterlab.models import checkpointing as R
from clusterlab.models import failures as MF

HOUR = 3600.0


def test_simpy_heartbeat_false_alarms_match_the_closed_form():
    p = hb.HeartbeatParams(timeout_s=1.3, crash_s=20_000.0)
    seen = hb.heartbeat_summary(hb.simulate(p, seed=3))
    want = MF.heartbeat_false_alarm_rate(1.3, p.interval_s, p.jitter_s, p.loss) * 20_000
    assert abs(seen["false_alarms"] - want) < 4 * np.sqrt(want), (seen, want)


def test_simpy_heartbeat_detection_time_matches_the_closed_form():
    p = hb.HeartbeatParams(timeout_s=2.0, crash_s=20.0)
    times = [
        hb.heartbeat_summary(hb.simulate(p, seed=s))["detection_time_s"]
        for s in range(300)
    ]
    want = MF.heartbeat_detection_time(2.0, 1.0, p.base_delay_s, p.jitter_s, p.loss)
    assert np.mean(times) == pytest.approx(want, abs=4 * np.std(times) / np.sqrt(300))


def test_vectorised_heartbeat_sweep_matches_the_closed_forms():
    p = hb.HeartbeatParams()
    sweep = hb.heartbeat_sweep(p, [1.1, 1.3, 1.6, 2.0], seed=1, n_heartbeats=400_000)
    fa = sweep["false_alarm_rate_per_s"] / sweep["model_false_alarm_rate_per_s"]
    assert fa.between(0.85, 1.15).all(), sweep
    det = sweep["detection_time_s"] - sweep["model_detection_time_s"]
    assert det.abs().max() < 0.03, sweep


def test_a_wrong_model_would_be_caught():
    """The same check fails if the detection time forgets the half interval."""
    sweep = hb.heartbeat_sweep(hb.HeartbeatParams(), [2.0], seed=1)
    wrong = 2.0 + 0.01 + 0.1  # no -interval/2
    assert abs(sweep["detection_time_s"].iloc[0] - wrong) > 0.3


def test_heartbeat_invariants():
    p = hb.HeartbeatParams(jitter_s=0.3, loss=0.05)
    sweep = hb.heartbeat_sweep(p, np.arange(1.0, 4.01, 0.5), seed=2)
    assert (np.diff(sweep["false_alarm_rate_per_s"]) <= 0).all()  # longer T, fewer
    assert (np.diff(sweep["detection_time_s"]) > 0).all()  # longer T, later
    assert (sweep["detection_time_s"] >= 0).all()
    events = hb.simulate(hb.HeartbeatParams(crash_s=100.0), seed=0)
    assert events["time_s"].is_monotonic_increasing
    assert not events.loc[events["event"] == "sent", "alive"].eq(False).any()


def test_heartbeat_grid_has_every_slider_value():
    grid = hb.heartbeat_grid(
        hb.HeartbeatParams(), [1.0, 2.0], jitters_ms=(50, 100), losses_pct=(0, 5)
    )
    assert len(grid) == 8
    assert set(grid["jitter_ms"]) == {50, 100} and set(grid["loss_pct"]) == {0, 5}


def test_job_simulation_goodput_and_mtbf_match_the_models():
    p = jf.JobParams(work_s=3000 * HOUR, n_parts=1024)
    phases = jf.simulate(p, seed=4)
    s = jf.job_summary(phases)
    assert s["work_s"] == pytest.approx(p.work_s)
    want = R.goodput(p.interval_s, p.checkpoint_cost_s, p.job_mtbf_s, p.restart_s)
    assert s["goodput"] == pytest.approx(want, abs=0.01)
    # failures arrive at rate n / m over the wall time: job MTBF = m / N
    assert s["failures"] == pytest.approx(s["wall_s"] / p.job_mtbf_s, rel=0.3)


def test_job_simulation_invariants():
    phases = jf.simulate(jf.JobParams(n_parts=4096), seed=1)
    assert (phases["end_s"] >= phases["start_s"]).all()
    assert np.allclose(phases["start_s"].iloc[1:].values, phases["end_s"].iloc[:-1])
    assert phases["saved_s"].is_monotonic_increasing
    s = jf.job_summary(phases)
    total = s["work_s"] + s["lost_work_s"] + s["checkpoint_s"] + s["restart_s"]
    assert total == pytest.approx(s["wall_s"])
    assert 0 < s["goodput"] <= 1


def test_more_parts_mean_more_failures_and_less_goodput():
    small = jf.job_summary(jf.simulate(jf.JobParams(n_parts=256), seed=2))
    big = jf.job_summary(jf.simulate(jf.JobParams(n_parts=8192), seed=2))
    assert big["failures"] > small["failures"]
    assert big["goodput"] < small["goodput"]


def test_simulated_optimum_interval_is_within_ten_percent_of_young_daly():
    p = jf.JobParams()  # 1024 GPUs of 50,000 h: job MTBF 48.8 h; C = 60 s
    taus = np.geomspace(1000.0, 20_000.0, 80)
    sweep = jf.goodput_sweep(p, taus, seed=0, n_failures=200_000)
    best = sweep.loc[sweep["goodput"].idxmax(), "interval_s"]
    young = R.young_daly_interval(p.checkpoint_cost_s, p.job_mtbf_s)
    daly = R.daly_interval(p.checkpoint_cost_s, p.job_mtbf_s)
    assert best == pytest.approx(young, rel=0.10)
    assert best == pytest.approx(daly, rel=0.10)
    assert (sweep["goodput"] - sweep["model_goodput"]).abs().max() < 0.003


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="loss=0.95"):
        hb.HeartbeatParams(loss=0.95)
    with pytest.raises(ValueError, match="n_parts=0"):
        jf.JobParams(n_parts=0)
    with pytest.raises(ValueError, match="intervals_s"):
        jf.goodput_sweep(jf.JobParams(), [0.0])


def test_charts_and_widgets_build(capsys):
    sweep = hb.heartbeat_sweep(hb.HeartbeatParams(), [1.0, 2.0, 3.0])
    assert "hconcat" in cl.failures.chart.heartbeat_chart(sweep).to_dict()
    grid = hb.heartbeat_grid(
        hb.HeartbeatParams(), [1.0, 2.0], jitters_ms=(50, 100), losses_pct=(0, 5)
    )
    names = {
        p["name"]
        for p in cl.failures.chart.heartbeat_explorer(grid).to_dict()["params"]
    }
    assert names == {"jitter_ms", "loss_pct"}
    spec = cl.checkpointing.chart.goodput_explorer().to_dict()
    assert len(spec["params"]) == 4
    gp = jf.goodput_sweep(jf.JobParams(), [1000.0, 4000.0])
    assert (
        "layer"
        in cl.checkpointing.chart.goodput_chart(
            gp, young_s=4000.0, daly_s=3900.0
        ).to_dict()
    )
    timeline = cl.checkpointing.chart.job_timeline_chart(
        jf.simulate(jf.JobParams(), 0)
    ).to_dict()
    enc = timeline["encoding"]
    assert (enc["x"]["field"], enc["x2"]["field"], enc["color"]["field"]) == (
        "start_h",
        "end_h",
        "kind",
    )
    assert timeline["mark"]["type"] == "bar" and timeline["title"]
    df = pd.DataFrame({"fault": ["kill"], "rank": [0], "learned_s": [0.01]})
    survivors = cl.failures.chart.survivor_chart(df).to_dict()
    assert survivors["encoding"]["x"]["field"] == "learned_s"
    assert survivors["encoding"]["y"]["field"] == "fault"
    assert len(cl.failures.widget.heartbeat_widget().children) == 2
    assert len(cl.checkpointing.widget.goodput_widget().children) == 4


def test_the_detection_check_accepts_the_solution_and_rejects_wrong_answers(capsys):
    assert (
        cl.failures.check.mean_detection_time(cl.failures.answer.mean_detection_time)
        is True
    )

    def stub(t, dt, d):
        raise NotImplementedError

    assert cl.failures.check.mean_detection_time(stub) is False
    assert "not attempted" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="halfway"):
        cl.failures.check.mean_detection_time(lambda t, dt, d: t + d)
    with pytest.raises(AssertionError, match="still on its way"):
        cl.failures.check.mean_detection_time(lambda t, dt, d: t - dt / 2)
