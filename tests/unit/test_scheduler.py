"""The scheduler simulation against cases worked by hand, and its invariants."""

import math

import pytest

from clusterlab.control_plane.sim import (
    Job,
    SchedulerParams,
    compare_policies,
    place,
    random_jobs,
    simulate,
    summarize,
)


def _by_job(table):
    return table.set_index("job")


def test_greedy_deadlocks_two_jobs_of_six_on_eight_gpus():
    # By hand: GPUs go out one at a time, a b a b ...: each holds 4 of its 6,
    # no GPU is left, neither can start. Held idle to 30 s: 2 x 4 x 30 = 240.
    jobs = [Job("a", 0.0, 6, 10.0), Job("b", 0.0, 6, 10.0)]
    t = simulate(jobs, SchedulerParams(1, 8, "greedy"), horizon_s=30.0)
    assert t["deadlocked"].all()
    assert t["held_idle_gpu_s"].sum() == pytest.approx(240.0)
    assert summarize(t, 8)["makespan_s"] == math.inf


def test_gang_runs_them_one_after_the_other():
    jobs = [Job("a", 0.0, 6, 10.0), Job("b", 0.0, 6, 10.0)]
    t = _by_job(simulate(jobs, SchedulerParams(1, 8, "gang")))
    assert (t.loc["a", "start_s"], t.loc["a", "end_s"]) == (0.0, 10.0)
    assert (t.loc["b", "start_s"], t.loc["b", "end_s"]) == (10.0, 20.0)
    assert t["held_idle_gpu_s"].sum() == 0


JOBS_BACKFILL = [
    Job("j0", 0.0, 4, 10.0),  # runs 0-10
    Job("j1", 0.0, 8, 10.0),  # needs all 8: reserved for 10
    Job("j2", 1.0, 4, 5.0),  # fits the 4 idle GPUs and ends at 6 <= 10
    Job("j3", 1.0, 4, 20.0),  # would end at 21: it would delay j1
]


def test_gang_fcfs_by_hand():
    t = _by_job(simulate(JOBS_BACKFILL, SchedulerParams(1, 8, "gang")))
    assert list(t["start_s"]) == [0.0, 10.0, 20.0, 20.0]


def test_backfill_by_hand():
    t = _by_job(simulate(JOBS_BACKFILL, SchedulerParams(1, 8, "backfill")))
    assert list(t["start_s"]) == [0.0, 10.0, 1.0, 20.0]
    assert t.loc["j2", "end_s"] == 6.0


def test_topology_keeps_a_job_under_one_switch_by_hand():
    # 2 switches x 4 GPUs. j0 takes 2 GPUs of switch 0; j1 wants 4: "any" takes
    # GPUs 2, 3, 4, 5 (two switches), "topology" takes switch 1 whole.
    jobs = [Job("j0", 0.0, 2, 100.0), Job("j1", 1.0, 4, 10.0), Job("j2", 2.0, 2, 10.0)]
    spans = {
        pl: list(simulate(jobs, SchedulerParams(2, 4, "gang", pl))["switches"])
        for pl in ("any", "topology")
    }
    assert spans == {"any": [1, 2, 1], "topology": [1, 1, 1]}


def test_place_best_fit_and_fewest_switches():
    p = SchedulerParams(3, 4, "gang", "topology")
    free = {0, 1, 2, 3, 4, 5, 8}  # switch 0: 4 free, switch 1: 2, switch 2: 1
    assert place(free, 2, p) == [4, 5]  # the tightest switch that fits
    assert place(free, 5, p) == [0, 1, 2, 3, 4]  # the fullest first
    assert place(free, 8, p) is None


def test_invariants_on_a_random_workload():
    jobs = random_jobs(60, 32, seed=3)
    for policy in ("gang", "backfill"):
        for placement in ("any", "topology"):
            p = SchedulerParams(4, 8, policy, placement)
            t = simulate(jobs, p)
            assert not t["deadlocked"].any()
            assert (t["wait_s"] >= 0).all() and (t["start_s"] >= t["arrival_s"]).all()
            # never more GPUs busy than the cluster has, at any start instant
            for s in t["start_s"]:
                busy = t[(t["start_s"] <= s) & (t["end_s"] > s)]["n_gpus"].sum()
                assert busy <= p.total_gpus
            assert summarize(t, p.total_gpus)["busy_share"] <= 1.0 + 1e-9
    table = compare_policies(jobs, 4, 8).set_index(["policy", "placement"])
    assert (
        table.loc[("backfill", "any"), "mean_wait_s"]
        <= table.loc[("gang", "any"), "mean_wait_s"]
    )


@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(n_switches=0), "n_switches"),
        (dict(gpus_per_switch=-1), "gpus_per_switch"),
        (dict(policy="fifo"), "policy"),
        (dict(placement="near"), "placement"),
    ],
)
def test_bad_params_raise_naming_them(kwargs, word):
    with pytest.raises(ValueError, match=word):
        SchedulerParams(**kwargs)


def test_bad_jobs_raise_naming_them():
    p = SchedulerParams(1, 8)
    with pytest.raises(ValueError, match="n_gpus"):
        simulate([Job("x", 0.0, 9, 1.0)], p)
    with pytest.raises(ValueError, match="runtime_s"):
        simulate([Job("x", 0.0, 1, 0.0)], p)
    with pytest.raises(ValueError, match="jobs"):
        simulate([], p)
    with pytest.raises(ValueError, match="n_jobs"):
        random_jobs(0, 8)
