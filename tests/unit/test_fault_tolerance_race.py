"""One failure schedule, two ways of recovering: the replays, the readers of each
run's logs, and the checks that hold a measurement to its replay.

The runs here are synthetic logs written the way the trainers write them, from a
known timeline, so each reader must find the step time, the costs and the
goodput that made them; the checks must pass the right replay and fail a replay
that leaves out a cost or counts one twice.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from clusterlab.fault_tolerance import chart, check, race, sim
from clusterlab.fault_tolerance.measure import KILL_COLUMNS, FaultRun, check_schedule
from clusterlab.models.fault_tolerance import per_step_waste_s

STEP, EVERY, CKPT, RESTART, STEPS = 0.03, 10, 0.004, 2.0, 200


def restart_run(
    fail_at, restart_s=RESTART, jitter=0.0, seed=0, slow=None
) -> race.RestartRun:
    """A checkpoint-restart run's logs from a known timeline (the replay's rules).

    ``slow``: None, or ``(from_s, to_s, factor)``: steps that start in that
    stretch take ``factor`` times as long (another program took the cores).
    """
    rng = np.random.default_rng(seed)
    rows, ckpts, kills = [], [], []
    t0 = 1000.0
    t, done, saved, attempt, k = 0.0, 0, 0, 0, 0
    while done < STEPS:
        step = STEP * (1 + jitter * rng.standard_normal())
        if slow is not None and slow[0] <= t < slow[1]:
            step *= slow[2]
        end = t + step
        if k < len(fail_at) and fail_at[k] < end + (
            CKPT if (done + 1) % EVERY == 0 else 0
        ):
            kills.append((attempt, 1, t0 + fail_at[k]))
            r = restart_s[k] if isinstance(restart_s, list) else restart_s
            t, done, attempt, k = fail_at[k] + r, saved, attempt + 1, k + 1
            continue
        rows.append((attempt, done, t0 + end))
        t, done = end, done + 1
        if done % EVERY == 0:
            ckpts.append((attempt, done, CKPT))
            t += CKPT
            saved = done
    return race.RestartRun(
        steps=pd.DataFrame(rows, columns=["attempt", "step", "time"]),
        checkpoints=pd.DataFrame(ckpts, columns=["attempt", "step", "seconds"]),
        kills=pd.DataFrame(kills, columns=["attempt", "pid", "time"]),
        n_steps=STEPS, every=EVERY, nproc=3, exit_code=0,
    )  # fmt: skip


def per_step_run(kills, stall=1.0, rejoin=3.0, groups=3, steps=300, batch=2):
    """A per-step run's log: each kill stalls the job, then one group is out."""
    t0, rows, t, step, pos = 500.0, [], 0.0, 0, 0
    life = {str(g): 0 for g in range(groups)}
    out = {}  # group -> (time it trains again, time it heals)
    kill_rows, pending = [], list(kills)
    while step < steps:
        if pending and pending[0][1] <= t + STEP:  # it dies in the coming step
            g, at = pending.pop(0)
            kill_rows.append(
                {"replica_id": g, "life": life[g], "time": t0 + at, "step": step}
            )
            life[g] += 1
            out[g] = (at + rejoin, at + rejoin - STEP)
            t = at + stall - STEP  # the survivors' next commit: `stall` after
        t += STEP
        step += 1
        live = [g for g in map(str, range(groups)) if g not in out or out[g][1] <= t]
        trains = [g for g in live if g not in out or out[g][0] <= t]
        healing = [g for g in live if g not in trains]
        step_samples = list(range(pos, pos + batch * len(trains)))
        for r, g in enumerate(trains):
            rows.append(dict(step=step, replica_id=g, participants=len(live),
                             samples=step_samples[r * batch:(r + 1) * batch],
                             step_samples=step_samples, params_sha256=f"h{step}",
                             healed_from=None, time=t0 + t, life=life[g]))  # fmt: skip
        for g in healing:
            rows.append(dict(step=step, replica_id=g, participants=len(live),
                             samples=[], step_samples=step_samples,
                             params_sha256=f"h{step}", healed_from="0",
                             time=t0 + t, life=life[g]))  # fmt: skip
        pos += len(step_samples)
        out = {g: w for g, w in out.items() if w[0] > t}
    log = pd.DataFrame(rows)
    kills_df = pd.DataFrame(kill_rows).assign(restart_time=np.nan)[KILL_COLUMNS]
    first = kill_rows[0]["replica_id"]
    return FaultRun(log=log, killed=first, kill_time=0.0, restart_time=0.0,
                    kill_step=0, steps=steps, kills=kills_df)  # fmt: skip


# --------------------------------------------------------------- the replays
def test_a_replay_without_failures_is_steps_and_checkpoints():
    r = sim.replay_checkpoint_restart(
        [], steps=100, step_s=0.1, every=10, checkpoint_s=0.5, restart_s=3.0
    )
    assert r["wall_s"] == pytest.approx(100 * 0.1 + 9 * 0.5)  # none after the last
    assert r["lost_steps"] == 0 and r["failures"] == 0


def test_a_failure_loses_the_steps_since_the_checkpoint_and_pays_a_restart():
    # steps of 1 s, a checkpoint (0 s) after every 10th: a failure at 15.5 s
    # loses steps 10..14 and 0.5 s of step 15, then 3 s of restart
    r = sim.replay_checkpoint_restart(
        [15.5], steps=20, step_s=1.0, every=10, checkpoint_s=0.0, restart_s=3.0
    )
    assert r["lost_steps"] == 5
    assert r["wall_s"] == pytest.approx(15.5 + 3.0 + 10.0)


def test_a_failure_during_a_restart_starts_it_again():
    once = sim.replay_checkpoint_restart(
        [5.5], steps=20, step_s=1.0, every=10, checkpoint_s=0.0, restart_s=3.0
    )
    twice = sim.replay_checkpoint_restart(
        [5.5, 7.0], steps=20, step_s=1.0, every=10, checkpoint_s=0.0, restart_s=3.0
    )
    assert twice["wall_s"] == pytest.approx(once["wall_s"] + 1.5)
    assert twice["failures"] == 2


def test_one_per_step_failure_costs_the_models_waste():
    r = sim.replay_per_step([10.0], [1.0], [4.0], window_s=60.0, n_groups=4)
    assert r["waste_s"] == pytest.approx(per_step_waste_s(1.0, 4.0, 4))
    assert r["goodput"] == pytest.approx(1 - per_step_waste_s(1.0, 4.0, 4) / 60)


def test_overlapping_per_step_failures_cost_less_than_their_sum():
    apart = sim.replay_per_step([5.0, 20.0], [1.0, 1.0], [4.0, 4.0], window_s=40.0,
                                n_groups=3)  # fmt: skip
    close = sim.replay_per_step([5.0, 7.0], [1.0, 1.0], [4.0, 4.0], window_s=40.0,
                                n_groups=3)  # fmt: skip
    assert apart["waste_s"] == pytest.approx(2 * per_step_waste_s(1.0, 4.0, 3))
    # the second stall (7..8 s) falls while the first group is out: counted once
    assert close["waste_s"] == pytest.approx(apart["waste_s"] - 1.0 / 3)


def test_the_replays_reject_bad_arguments():
    with pytest.raises(ValueError, match="every"):
        sim.replay_checkpoint_restart(
            [1.0], steps=10, step_s=1.0, every=11, checkpoint_s=0, restart_s=1
        )
    with pytest.raises(ValueError, match="step_s"):
        sim.replay_checkpoint_restart(
            [1.0], steps=10, step_s=0.0, every=1, checkpoint_s=0, restart_s=1
        )
    with pytest.raises(ValueError, match="one of each per failure"):
        sim.replay_per_step([1.0, 2.0], [1.0], [2.0], window_s=10.0, n_groups=3)
    with pytest.raises(ValueError, match="n_groups"):
        sim.replay_per_step([1.0], [1.0], [2.0], window_s=10.0, n_groups=1)


def test_a_schedule_keeps_its_mean_and_its_shortest_gap():
    times = sim.failure_schedule(10.0, 1000, seed=3, min_gap_s=4.0)
    gaps = np.diff([0.0, *times])
    assert gaps.min() >= 4.0
    assert gaps.mean() == pytest.approx(10.0, rel=0.08)
    weibull = sim.failure_schedule(
        10.0, 1000, seed=3, distribution="weibull", shape=0.5
    )
    assert np.diff([0.0, *weibull]).mean() == pytest.approx(10.0, rel=0.25)
    with pytest.raises(ValueError, match="min_gap_s"):
        sim.failure_schedule(3.0, 2, min_gap_s=3.0)
    with pytest.raises(ValueError, match="n="):
        sim.failure_schedule(3.0, 0)


def test_a_kill_schedule_must_be_increasing_seconds():
    assert check_schedule([1, 2.5]) == [1.0, 2.5]
    bad_ones = [([2.0, 1.0], "increasing"), ([], "1 to 100"),
                (["x"], "list of seconds"), ([0.0], r"kill_after_s\[0\]")]  # fmt: skip
    for bad, word in bad_ones:
        with pytest.raises(ValueError, match=word):
            check_schedule(bad)


# --------------------------------------------- reading the checkpoint-restart run
def test_the_restart_run_reader_finds_the_timeline_that_made_the_log():
    run = restart_run([2.0, 4.9])
    got = race.restart_costs(run)
    assert got["step_s"] == pytest.approx(STEP)
    assert got["checkpoint_s"] == pytest.approx(CKPT)
    assert got["restart_s"] == pytest.approx([RESTART, RESTART], abs=1e-9)
    assert got["fail_at_s"] == pytest.approx([2.0, 4.9])
    replay = sim.replay_checkpoint_restart(
        [2.0, 4.9], steps=STEPS, step_s=STEP, every=EVERY, checkpoint_s=CKPT,
        restart_s=RESTART,
    )  # fmt: skip
    assert got["goodput"] == pytest.approx(replay["goodput"], rel=1e-6)
    assert sum(got["lost_steps"]) == replay["lost_steps"]


def test_the_replay_follows_the_run_s_own_step_times_when_the_machine_slows():
    # the steps before the first failure run at half speed: the failure finds
    # the job fewer steps past its checkpoint than a steady step time says
    run = restart_run([2.0, 4.9], slow=(0.0, 2.0, 2.0))
    got = race.restart_costs(run)
    assert len(got["step_times_s"]) == len(run.steps)
    follows = sim.replay_checkpoint_restart(
        got["fail_at_s"], steps=STEPS, step_s=got["step_s"], every=EVERY,
        checkpoint_s=CKPT, restart_s=float(np.mean(got["restart_s"])),
        step_times_s=got["step_times_s"],
    )  # fmt: skip
    assert follows["goodput"] == pytest.approx(got["goodput"], rel=1e-6)
    assert follows["lost_steps"] == sum(got["lost_steps"])
    steady = sim.replay_checkpoint_restart(
        got["fail_at_s"], steps=STEPS, step_s=got["step_s"], every=EVERY,
        checkpoint_s=CKPT, restart_s=float(np.mean(got["restart_s"])),
    )  # fmt: skip
    assert steady["lost_steps"] != follows["lost_steps"]
    with pytest.raises(ValueError, match=r"step_times_s\[1\]"):
        sim.replay_checkpoint_restart(
            [1.0], steps=10, step_s=0.1, every=5, checkpoint_s=0.0,
            restart_s=0.5, step_times_s=[0.1, -0.1],
        )  # fmt: skip


def test_the_replay_takes_each_failure_s_own_restart():
    # the first restart is 0.6 s longer than the second: with the mean for both,
    # the second failure finds the job 20 steps off where the run was
    fast = restart_run([2.0, 6.0])
    slow_first = restart_run([2.0, 6.0], restart_s=[RESTART + 0.6, RESTART])
    got = race.restart_costs(slow_first)
    assert got["restart_at_failure_s"] == pytest.approx([RESTART + 0.6, RESTART])
    replay = race.predict_restart(got, slow_first)
    assert replay["goodput"] == pytest.approx(got["goodput"], rel=1e-6)
    assert check.goodput_matches_replay(got["goodput"], replay, "checkpoint-restart")
    assert race.restart_costs(fast)["goodput"] > got["goodput"]
    with pytest.raises(ValueError, match="1 restarts for 2 failures"):
        sim.replay_checkpoint_restart(
            [1.0, 2.0], steps=10, step_s=0.1, every=5, checkpoint_s=0.0,
            restart_s=[0.5],
        )  # fmt: skip


def test_an_unfinished_restart_run_is_reported_not_measured():
    run = restart_run([2.0])
    run.exit_code = 1
    with pytest.raises(RuntimeError, match="did not finish"):
        race.restart_costs(run)


def test_the_restart_check_passes_its_replay_and_fails_a_replay_without_restarts():
    run = restart_run([2.0, 4.9], jitter=0.02)
    got = race.restart_costs(run)
    assert check.goodput_matches_replay(
        got["goodput"], race.predict_restart(got, run), "checkpoint-restart"
    )
    # a model with free restarts
    forgot = dict(got, restart_s=[0.0, 0.0], restart_at_failure_s=[0.0, 0.0])
    with pytest.raises(AssertionError, match="kept less work than the model allows"):
        check.goodput_matches_replay(
            got["goodput"], race.predict_restart(forgot, run), "checkpoint-restart"
        )
    doubled = dict(
        got,
        restart_s=[2 * r for r in got["restart_s"]],
        restart_at_failure_s=[2 * r for r in got["restart_at_failure_s"]],
    )
    with pytest.raises(AssertionError, match="kept more work"):
        check.goodput_matches_replay(
            got["goodput"], race.predict_restart(doubled, run), "checkpoint-restart"
        )


# ------------------------------------------------------ reading the per-step run
def test_the_per_step_reader_finds_stalls_rejoins_and_goodput():
    run = per_step_run([("1", 2.0), ("2", 7.0)])
    got = race.per_step_costs(run, 3)
    assert got["step_s"] == pytest.approx(STEP)
    assert got["recovery_s"] == pytest.approx([1.0, 1.0], abs=1e-6)
    assert got["rejoin_s"] == pytest.approx([3.0, 3.0], abs=STEP + 1e-6)
    want = sim.replay_per_step(
        got["fail_at_s"], got["recovery_s"], got["rejoin_s"],
        window_s=got["window_s"], n_groups=3,
    )  # fmt: skip
    assert got["goodput"] == pytest.approx(want["goodput"], abs=2 * STEP / 10)


def test_a_stall_the_victim_is_back_from_is_no_step_of_the_full_quorum():
    # seen on two busy cores: the victim rejoined as the survivors' stall ended,
    # so the stalled step had the full quorum on both sides; counted as a step,
    # it raised the step time by a third and the measured goodput with it
    run = per_step_run([("1", 2.0), ("2", 7.0)], stall=3.0, rejoin=3.0)
    got = race.per_step_costs(run, 3)
    assert got["step_s"] == pytest.approx(STEP)
    assert check.goodput_matches_replay(
        got["goodput"], race.predict_per_step(got, 3), "per-step recovery"
    )


def test_the_per_step_check_fails_a_model_that_stops_the_whole_job_per_rejoin():
    run = per_step_run([("1", 2.0), ("2", 7.0)])
    got = race.per_step_costs(run, 3)
    assert check.goodput_matches_replay(
        got["goodput"], race.predict_per_step(got, 3), "per-step recovery"
    )
    # checkpoint-restart's accounting: the whole job waits until the group is back
    whole = dict(got, recovery_s=got["rejoin_s"])
    with pytest.raises(AssertionError, match="kept more work"):
        check.goodput_matches_replay(
            got["goodput"], race.predict_per_step(whole, 3), "per-step recovery"
        )


def test_the_checks_name_bad_input_and_the_loser():
    with pytest.raises(ValueError, match="lacks"):
        check.goodput_matches_replay(0.5, {"goodput": 0.5}, "x")
    with pytest.raises(ValueError, match="measured"):
        check.goodput_matches_replay(1.5, {"goodput": 1, "low": 0, "high": 1}, "x")
    assert check.per_step_keeps_more(0.8, 0.6)
    with pytest.raises(AssertionError, match="should keep more"):
        check.per_step_keeps_more(0.6, 0.6)


def test_the_race_chart_falls_back_at_each_kill_and_stays_small():
    run = restart_run([2.0, 4.9])
    ft = per_step_run([("1", 2.0), ("2", 7.0)])
    restart, per_step = race.restart_costs(run), race.per_step_costs(ft, 3)
    spec = chart.race_chart(run.steps, restart, ft.log, per_step, 3).to_dict()
    assert len(json.dumps(spec)) < 50_000
    rows = pd.DataFrame(next(iter(spec["datasets"].values())))
    ckpt = rows[rows["job"] == "checkpoint-restart"]
    at_kill = ckpt[np.isclose(ckpt["t_s"], 2.0, atol=1e-3)]
    # the work falls from the last step done to the last checkpoint at the kill
    assert len(at_kill) == 2 and at_kill["work"].iloc[0] > at_kill["work"].iloc[1]
    assert at_kill["work"].iloc[1] % EVERY == 0


def test_a_commit_logged_just_after_the_kill_is_not_the_survivors_recovery():
    from clusterlab.fault_tolerance.measure import back_after_kill

    log = pd.DataFrame(
        dict(
            replica_id=["0", "1", "2", "0", "2", "0"],
            participants=[3, 3, 3, 3, 2, 2],
            time=[1.00, 1.01, 1.02, 1.035, 2.10, 2.11],
        )
    )
    # group 1 is killed at 1.03; group 0's commit of that step lands at 1.035
    assert back_after_kill(log, "1", 1.03)["time"] == 2.10
    # with no smaller quorum in sight, the first commit after the kill is used
    assert back_after_kill(log.iloc[:4], "1", 1.03)["time"] == 1.035


def test_a_restarted_group_in_the_victims_place_hides_no_stall():
    from clusterlab.fault_tolerance.measure import back_after_kill

    # seen on two busy cores: group 2 dies after step 168 while group 1, back
    # from an earlier kill, is healing; the survivors commit step 169 at two
    # participants, as many as before, 1.08 s later
    log = pd.DataFrame(
        dict(
            step=[168, 168, 169, 169],
            replica_id=["2", "0", "0", "1"],
            participants=[2, 2, 2, 2],
            time=[10.000, 10.0004, 11.077, 11.078],
        )
    )
    assert back_after_kill(log, "2", 10.0002, last_step=168)["time"] == 11.077
    # without the victim's last step, group 0's commit of step 168 is taken
    assert back_after_kill(log, "2", 10.0002)["time"] == 10.0004


def test_a_kill_during_a_restart_cuts_it_short_and_the_replay_agrees():
    run = restart_run([2.0, 3.0])  # the second lands in the first restart
    assert 1 not in set(run.steps["attempt"])  # attempt 1 never took a step
    got = race.restart_costs(run)
    assert got["restart_s"] == pytest.approx([RESTART])  # only the whole one
    assert len(got["fail_at_s"]) == 2
    replay = sim.replay_checkpoint_restart(
        got["fail_at_s"], steps=STEPS, step_s=STEP, every=EVERY,
        checkpoint_s=CKPT, restart_s=RESTART,
    )  # fmt: skip
    assert got["goodput"] == pytest.approx(replay["goodput"], rel=1e-6)
    spec = chart.race_chart(
        run.steps, got, per_step_run([("1", 2.0)]).log,
        race.per_step_costs(per_step_run([("1", 2.0)]), 3), 3,
    ).to_dict()  # fmt: skip
    assert spec["layer"]


def test_a_measured_rate_with_a_group_away_replaces_the_share_it_leaves():
    base = sim.replay_per_step([5.0], [1.0], [4.0], window_s=40.0, n_groups=3)
    faster = sim.replay_per_step(
        [5.0], [1.0], [4.0], window_s=40.0, n_groups=3, relative_rate={1: 0.8}
    )
    # 3 s with one group away: 1/3 lost by default, 0.2 at the measured rate
    assert base["waste_s"] - faster["waste_s"] == pytest.approx(3 * (1 / 3 - 0.2))
    with pytest.raises(ValueError, match=r"relative_rate\[1\]"):
        sim.replay_per_step([5.0], [1.0], [4.0], window_s=40.0, n_groups=3,
                            relative_rate={1: 3.0})  # fmt: skip


def test_a_run_whose_restarted_group_could_not_rejoin_runs_once_more(monkeypatch):
    from clusterlab.fault_tolerance import measure

    calls, said = [], []

    def flaky(**kwargs):
        calls.append(kwargs)
        if len(calls) == 1:
            raise RuntimeError(
                "while waiting for the restarted groups' first commits, processes "
                "failed: {'replica1_restarted': 1}"
            )
        return "the second run"

    monkeypatch.setattr(measure, "kill_and_heal", flaky)
    got = measure.kill_and_heal_retried(steps=10, say=said.append)
    assert got == "the second run" and calls == [{"steps": 10}, {"steps": 10}]
    assert "try 1 of 2: a restarted group could not rejoin" in said[0]

    def broken(**kwargs):
        raise RuntimeError("while waiting for every group's first commit, ...")

    monkeypatch.setattr(measure, "kill_and_heal", broken)
    with pytest.raises(RuntimeError, match="every group's first commit"):
        measure.kill_and_heal_retried(say=said.append)  # not this kind: at once
    with pytest.raises(ValueError, match="tries"):
        measure.kill_and_heal_retried(tries=0)
