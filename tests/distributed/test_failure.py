"""A killed or frozen rank in a real gloo job, and a crash resumed under torchrun."""

import os
import tempfile
import time

import pytest
import torch

import clusterlab as cl
from clusterlab.failures import ranks as failures
from clusterlab.failures import resume as crash_resume

pytestmark = [pytest.mark.dist]


def test_a_killed_rank_is_named_within_timeout_and_survivors_learn_fast():
    timeout_s = 20.0
    start = time.monotonic()
    run = failures.run_fault("kill", 3, timeout_s=timeout_s, victim=2, backend="gloo")
    assert time.monotonic() - start < timeout_s + 5.0
    err = run.error
    assert isinstance(err, cl.core.supervisor.LaunchError)
    assert err.failed_ranks[0] == 2 and err.reports[2].status == "died"
    assert "rank 2 died" in str(err) and "SIGKILL" in str(err)
    # the survivors learned from closed sockets, long before the timeout
    assert sorted(run.survivors["rank"]) == [0, 1]
    assert (run.survivors["learned_s"] < 5.0).all(), run.survivors
    assert run.survivors["error"].str.contains("closed|reset", case=False).all()


def test_a_frozen_rank_is_found_only_by_the_timeout():
    timeout_s = 2.0
    start = time.monotonic()
    run = failures.run_fault("freeze", 3, timeout_s=timeout_s, victim=1, backend="gloo")
    assert time.monotonic() - start < timeout_s + 5.0
    assert 1 in run.error.failed_ranks and run.error.reports[1].status == "stopped"
    waited = run.survivors["waited_s"]
    assert len(waited) == 2 and waited.between(0.8 * timeout_s, timeout_s + 2).all()
    assert run.survivors["error"].str.contains("Timed out", case=False).all()


def test_run_fault_checks_its_arguments():
    with pytest.raises(ValueError, match="fault='drop'"):
        failures.run_fault("drop")
    with pytest.raises(ValueError, match="victim=4"):
        failures.run_fault("kill", 4, victim=4)


def test_a_run_resumed_by_the_caller_equals_an_uninterrupted_run():
    ref = cl.launch(
        crash_resume.train, 2, steps=12, every=4, ckpt_dir=tempfile.mkdtemp()
    )
    ckpt = tempfile.mkdtemp()
    with pytest.raises(cl.core.supervisor.LaunchError, match="rank 1 died"):
        cl.launch(crash_resume.train, 2, steps=12, every=4, ckpt_dir=ckpt, crash_at=10)
    out = cl.launch(crash_resume.train, 2, steps=12, every=4, ckpt_dir=ckpt, attempt=1)
    assert out[0]["start_step"] == 8
    assert torch.equal(out[0]["weights"], ref[0]["weights"])
    redone = {s for a, s in crash_resume.read_step_log(ckpt) if a == 0} & {
        s for a, s in crash_resume.read_step_log(ckpt) if a == 1
    }
    assert redone == {8, 9}


def test_torchrun_restarts_the_crashed_run_and_it_ends_like_an_uninterrupted_one():
    ckpt = tempfile.mkdtemp()
    args = ["--steps", 12, "--every", 4, "--crash-at", 10, "--dir", ckpt]
    cl.core.torchrun.run_torchrun(
        "clusterlab.failures.resume", 2, *args, max_restarts=1, timeout=240
    )
    log = crash_resume.read_step_log(ckpt)
    assert [s for a, s in log if a == 0] == list(range(10))
    assert [s for a, s in log if a == 1] == list(range(8, 12))
    ref = cl.launch(
        crash_resume.train, 2, steps=12, every=4, ckpt_dir=tempfile.mkdtemp()
    )
    final = torch.load(os.path.join(ckpt, "final.pt"))
    assert final["start_step"] == 8
    assert torch.equal(final["weights"], ref[0]["weights"])
