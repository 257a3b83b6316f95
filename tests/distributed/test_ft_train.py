"""Training that does not stop, for real: torchft's lighthouse, three replica
groups on gloo, one SIGKILLed at a random step and restarted.

Every step 1..N is committed by at least one group, the groups that commit a step
agree on its parameters, no sample is trained twice or skipped, the restarted
group rejoins after the kill having healed from a live peer, every listener is
on loopback, and no process outlives the run.
"""

from __future__ import annotations

import random
import subprocess
import sys

import psutil
import pytest

pytest.importorskip("torchft")

from clusterlab.fault_tolerance import check, measure  # noqa: E402

STEPS = 400  # after the kill, time for the restarted group to rejoin, even when busy


@pytest.fixture(scope="module")
def run():
    kill_at = random.Random().randint(10, 50)
    return measure.kill_and_heal(
        steps=STEPS, kill_at_step=kill_at, killed=random.Random().randint(0, 2),
        step_ms=40.0, timeout_s=120.0,
    )  # fmt: skip


def test_every_group_exits_zero_after_the_last_step(run):
    assert set(run.exit_codes.values()) == {0}, run.exit_codes
    last = run.log.groupby(["replica_id", "life"])["step"].max()
    assert (last.drop(index=(run.killed, 0)) == STEPS).all(), last


def test_every_step_is_committed_once_per_group_with_equal_parameters(run):
    assert check.every_step_committed(run.log, STEPS)
    assert check.params_agree(run.log)
    per_group = run.log.groupby(["replica_id", "life"])["step"]
    assert (per_group.count() == per_group.nunique()).all()


def test_no_sample_is_trained_twice_or_skipped(run):
    assert check.exactly_once(run.log)


def test_the_restarted_group_heals_from_a_live_peer_after_the_kill(run):
    assert check.healed_after_kill(run.log, run.killed, run.kill_step)
    # the survivors went on: their first commit after the victim's last step
    back = measure.back_after_kill(run.log, run.killed, run.kill_time, run.kill_step)
    assert back["time"] - run.kill_time < 10
    if back["participants"] != 2:
        # the restarted group came back before a smaller quorum formed: then
        # the quorum of three that went on has it in, at that very step
        log = run.log
        restarted = log[(log["replica_id"] == str(run.killed)) & (log["life"] == 1)]
        assert back["participants"] == 3, back
        assert (restarted["step"] == back["step"]).any(), (back, restarted.head())


def test_every_listener_is_on_loopback(run):
    assert {"lighthouse", "replica0", "replica1", "replica2"} <= set(run.listeners)
    assert all(run.listeners.values()), run.listeners  # each was seen listening
    assert check.loopback_only(run.listeners)


def test_nothing_is_left_running(run):
    for name, pid in run.pids.items():
        if psutil.pid_exists(pid):
            status = psutil.Process(pid).status()
            assert status == psutil.STATUS_ZOMBIE, f"{name} ({pid}) is {status}"


def test_the_command_rejects_bad_arguments():
    cmd = [sys.executable, "-m", "clusterlab.fault_tolerance.train",
           "--lighthouse", "http://127.0.0.1:1", "--replica-id", "0",
           "--steps", "0", "--log", "/dev/null"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "steps=0" in out.stderr, out.stderr
    cmd[cmd.index("--steps") + 1] = "5"
    cmd[cmd.index("--lighthouse") + 1] = "127.0.0.1:1"
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "lighthouse=" in out.stderr, out.stderr
