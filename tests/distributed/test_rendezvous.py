"""Date-stamped rendezvous ids never meet; one job id meets at once.

Two real ``torchrun`` agents per launch, on loopback: the essay's
``training_job_$(date +%Y%m%d_%H%M%S)`` read 1.5 s apart, and ``$SLURM_JOB_ID``
with wrong ``--master-addr`` values, which the c10d rendezvous ignores.
"""

import time

import numpy as np
import psutil
import pytest

import clusterlab as cl
from clusterlab.clocks import rendezvous as rdzv
from clusterlab.models.rendezvous import split_probability

pytestmark = pytest.mark.dist
JOIN_TIMEOUT_S = 8
BOUND_S = JOIN_TIMEOUT_S + 30  # start-up and shutdown on two busy cores


def _children() -> set:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def _listening(ports) -> list:
    return [
        c
        for c in psutil.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port in ports
    ]


@pytest.fixture(scope="module")
def runs():
    before = _children()
    start = time.monotonic()
    table = rdzv.compare_rendezvous_ids(join_timeout_s=JOIN_TIMEOUT_S)
    table.attrs["wall_s"] = time.monotonic() - start
    table.attrs["left"] = {
        p for p in _children() - before if psutil.pid_exists(p)
    }  # checked below
    return table


def test_the_demonstration_passes_its_own_check(runs):
    cl.clocks.rendezvous.check_rendezvous_ids(runs)
    assert runs.attrs["wall_s"] < BOUND_S + 5


def test_date_stamped_ids_differ_and_time_out_with_a_rendezvous_error(runs):
    date = runs[runs["ids"] == "date"]
    assert date["rdzv_id"].nunique() == 2
    assert not date["met"].any() and (date["exit_code"] != 0).all()
    assert date["allreduce"].isna().all()  # no worker ever started
    assert (date["elapsed_s"] >= JOIN_TIMEOUT_S - 2).all()
    assert (date["elapsed_s"] <= BOUND_S).all()
    assert date["reason"].str.match("Rendezvous(Timeout|Connection)Error").all()
    assert "RendezvousTimeoutError" in " ".join(date["reason"])


def test_one_job_id_meets_and_ignores_master_addr(runs):
    job = runs[runs["ids"] == "slurm_job_id"]
    assert (job["rdzv_id"] == "4242").all() and job["met"].all()
    assert (job["exit_code"] == 0).all() and (job["allreduce"] == 3.0).all()
    assert (job["waited_s"] < JOIN_TIMEOUT_S).all()
    assert not job["master_seen"].str.startswith("192.0.2.").any()


def test_no_process_or_listener_is_left_behind(runs):
    assert not runs.attrs["left"], f"processes left: {runs.attrs['left']}"
    ports = {int(e.rpartition(":")[2]) for e in runs["endpoint"]}
    assert not _listening(ports)


def _set(rows, **values):
    def mutate(d):
        sel = d["ids"] == rows
        for column, value in values.items():
            d.loc[sel, column] = value(d[sel]) if callable(value) else value

    return mutate


WRONG_OUTCOMES = {
    # different ids, yet the agents met: impossible, so the check must object
    "date ids met": _set("date", met=True, exit_code=0, allreduce=3.0),
    "date ids equal": _set("date", rdzv_id=lambda d: d["rdzv_id"].iloc[0]),
    "another error": _set("date", reason="ValueError: bad argument"),
    "failed early": _set("date", elapsed_s=1.0),
    "job id did not meet": _set("slurm_job_id", met=False),
    "wrong sum": _set("slurm_job_id", allreduce=2.0),
    "used --master-addr": _set(
        "slurm_job_id", master_seen=lambda d: d["master_given"] + ":9"
    ),
}


@pytest.mark.parametrize("name", WRONG_OUTCOMES)
def test_the_check_fails_on_a_wrong_outcome(runs, name):
    wrong = runs.copy()
    WRONG_OUTCOMES[name](wrong)
    with pytest.raises(AssertionError):
        rdzv.check_rendezvous_ids(wrong)


def test_past_the_overall_timeout_everything_is_killed(no_leftover_processes):
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="timeout_s=3"):
        rdzv.run_two_nodes("date", join_timeout_s=60, stagger_s=0.5, timeout_s=3.0)
    assert time.monotonic() - start < 10


def test_split_probability_matches_simulated_launches():
    rng = np.random.default_rng(0)
    for spread_s, n in [(0.017, 128), (0.2, 2), (0.5, 16)]:
        phase = rng.uniform(0.0, 1.0, size=(20_000, 1))
        seconds = np.floor(phase + rng.uniform(0.0, spread_s, size=(20_000, n)))
        simulated = np.mean(seconds.min(axis=1) != seconds.max(axis=1))
        expected = split_probability(spread_s, n)
        assert abs(simulated - expected) < 4 * np.sqrt(expected / 20_000) + 1e-3


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="spread_s"):
        split_probability(1.5)
    with pytest.raises(ValueError, match="id_source"):
        rdzv.run_two_nodes("uuid")
    with pytest.raises(ValueError, match="join_timeout_s"):
        rdzv.node_script("date", "127.0.0.1:1", join_timeout_s=0)
    with pytest.raises(ValueError, match="rdzv_endpoint"):
        cl.core.torchrun.agent_command(
            "m", nnodes=2, nproc=1, rdzv_id="x", rdzv_endpoint="nohost"
        )


def test_the_node_script_is_the_essays_launch_line():
    script = rdzv.node_script("date", "127.0.0.1:29500")
    assert script.startswith("id=training_job_$(date +%Y%m%d_%H%M%S);")
    assert '--rdzv-id="$id"' in script and "--rdzv-backend=c10d" in script
    assert "--rdzv-conf=join_timeout=8" in script
