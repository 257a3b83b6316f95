"""The launcher's guarantees, each checked with real gloo process groups."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest
import torch
import torch.distributed as dist
import workers

import clusterlab as cl
from clusterlab.core.launcher import _launch

pytestmark = [pytest.mark.dist]


def test_results_come_back_per_rank_from_a_locally_defined_function():
    offset = 100  # a closure: only a forked launch can run it

    def worker(rank, world_size, scale):
        x = torch.tensor([float(rank)])
        dist.all_reduce(x)
        return {
            "rank": rank,
            "sum": x.item() * scale + offset,
            "t": torch.arange(rank + 1),
        }

    out = cl.launch(worker, 3, scale=2.0)
    assert [r["rank"] for r in out] == [0, 1, 2]
    assert all(r["sum"] == 106.0 for r in out)
    assert torch.equal(out[2]["t"], torch.arange(3))


def test_module_level_worker_runs_under_spawn():
    assert _launch(workers.allreduce_rank, 2, "gloo", 60.0, "spawn", {}) == [3.0, 3.0]


def test_world_size_one_is_a_valid_group():
    assert cl.launch(workers.allreduce_rank, 1) == [1.0]


def test_a_rank_that_raises_is_named_with_its_traceback():
    def worker(rank, world_size):
        if rank == 2:
            raise ZeroDivisionError("rank two cannot divide")
        dist.barrier()
        return rank

    start = time.monotonic()
    with pytest.raises(cl.core.supervisor.LaunchError) as info:
        cl.launch(worker, 3, timeout=30)
    elapsed = time.monotonic() - start
    err = info.value
    assert err.failed_ranks[0] == 2
    assert "rank 2 raised ZeroDivisionError: rank two cannot divide" in str(err)
    assert "Traceback" in str(err) and "in worker" in str(err)
    assert elapsed < 10, (
        f"a raising rank should end the launch fast, took {elapsed:.1f} s"
    )


def test_ranks_that_fail_at_once_each_report_their_own_error():
    # Without a barrier after joining the group, a rank that raised and exited
    # at once broke a peer still connecting (gloo "connectFullMesh failed"),
    # often enough that 40 launches on 4 ranks failed this test every time.
    def stub(rank, world_size):
        raise NotImplementedError("not written yet")

    for _ in range(40):
        with pytest.raises(cl.core.supervisor.LaunchError) as info:
            cl.launch(stub, 4, timeout=30)
        errors = [r.error for r in info.value.reports]
        assert errors == ["NotImplementedError: not written yet"] * 4, errors


def test_a_rank_killed_by_sigkill_is_reported_at_once():
    start = time.monotonic()
    with pytest.raises(cl.core.supervisor.LaunchError) as info:
        cl.launch(workers.kill_self_during_collective, 3, timeout=20)
    elapsed = time.monotonic() - start
    assert info.value.failed_ranks[0] == 1
    assert "rank 1 died (killed by signal SIGKILL" in str(info.value)
    assert elapsed < 20 + 5


def test_a_hung_rank_ends_the_launch_within_timeout_plus_a_few_seconds():
    timeout = 3.0
    start = time.monotonic()
    with pytest.raises(cl.core.supervisor.LaunchError) as info:
        cl.launch(workers.hang, 2, timeout=timeout)
    elapsed = time.monotonic() - start
    assert 1 in info.value.failed_ranks
    assert "rank 1 was still running and was stopped" in str(info.value)
    assert elapsed < timeout + 5, f"took {elapsed:.1f} s"


def test_a_rank_that_never_finishes_after_the_others_is_stopped():
    def worker(rank, world_size):
        if rank == 1:
            time.sleep(10_000)  # no collective left to time out in
        return rank

    start = time.monotonic()
    with pytest.raises(
        cl.core.supervisor.LaunchError, match="rank 1 was still running"
    ):
        cl.launch(worker, 2, timeout=2.0)
    assert time.monotonic() - start < 2.0 + 5


def test_gloo_listens_on_loopback_only():
    for addrs in cl.launch(workers.listening_sockets, 2):
        assert addrs, "expected gloo to listen for its peers"
        assert set(addrs) <= {"127.0.0.1", "::1"}, addrs


def test_two_launches_at_once_do_not_collide():
    def worker(rank, world_size, tag):
        total = 0.0
        for _ in range(50):
            x = torch.full((1000,), float(tag))
            dist.all_reduce(x)
            total += x[0].item()
        return total

    results = {}

    def run(tag):
        results[tag] = cl.launch(worker, 2, tag=tag)

    threads = [threading.Thread(target=run, args=(tag,)) for tag in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == {tag: [100.0 * tag] * 2 for tag in (1, 2, 3)}


def test_two_processes_launching_at_once_do_not_collide():
    cmd = [sys.executable, "-m", "clusterlab"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert all("[3.0, 3.0]" in out for out in outs)


def test_prints_come_back_by_rank_and_nothing_else_is_shown(capfd):
    def worker(rank, world_size):
        print(f"hello from {rank}")
        print("to stderr", file=sys.stderr)
        os.write(2, b"low-level noise\n")
        dist.barrier()
        return rank

    cl.launch(worker, 2)
    out, err = capfd.readouterr()
    assert out == "[rank 0] hello from 0\n[rank 1] hello from 1\n"
    assert err == ""


def _default_signals():
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def _signal_masks(pid: int) -> str:
    """The signal lines of /proc/PID/status, to say why a signal did nothing."""
    try:
        lines = open(f"/proc/{pid}/status").read().splitlines()
    except OSError:
        return "no /proc status"
    return ", ".join(x for x in lines if x.startswith(("SigBlk", "SigIgn", "SigCgt")))


def _run_script_and_signal(tmp_path, sig):
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    script = textwrap.dedent(f"""
        import clusterlab as cl
        from workers import hang
        cl.launch(hang, 2, timeout=600, victim=0, pid_dir={str(pid_dir)!r})
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # A child inherits ignored and blocked signals: whatever ran earlier in
        # this test process, the launcher starts as a reader's shell starts it.
        preexec_fn=_default_signals,
    )
    deadline = time.monotonic() + 60
    while len(list(pid_dir.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    rank_pids = [int(p.read_text()) for p in pid_dir.iterdir()]
    assert len(rank_pids) == 2
    proc.send_signal(sig)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:  # stop what it left, then fail
        masks = _signal_masks(proc.pid)
        for p in psutil.Process(proc.pid).children(recursive=True) + [proc]:
            p.kill()
        proc.wait(10)
        raise AssertionError(
            f"the launcher did not exit within 30 s of {sig.name} ({masks})"
        ) from None
    gone_by = time.monotonic() + 10
    alive = rank_pids
    while time.monotonic() < gone_by:
        alive = [
            p
            for p in rank_pids
            if psutil.pid_exists(p)
            and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
        ]
        if not alive:
            break
        time.sleep(0.1)
    return alive


# A signal's clean-up races a deadline (30 s for the launcher to exit, 10 s for
# its ranks to go); beside a loaded parallel phase it once missed, so it runs
# with the timings, alone.
@pytest.mark.timing
@pytest.mark.xfail(
    reason="open: since the topic move the launcher at times does not exit within "
    "30 s of SIGINT (seen three times in full runs, never when run alone)",
    strict=False,
)
def test_an_interrupted_launch_leaves_no_rank_behind(tmp_path):
    assert _run_script_and_signal(tmp_path, signal.SIGINT) == []


@pytest.mark.timing
@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux"
)
def test_ranks_die_with_a_killed_kernel(tmp_path):
    assert _run_script_and_signal(tmp_path, signal.SIGKILL) == []


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"world_size": 0}, "world_size=0"),
        ({"world_size": 65}, "world_size=65"),
        ({"world_size": 2.5}, "world_size=2.5"),
        ({"world_size": "2"}, "world_size='2'"),
        ({"timeout": 0}, "timeout=0"),
        ({"timeout": -1}, "timeout=-1"),
        ({"timeout": float("nan")}, "timeout=nan"),
        ({"backend": "mpi"}, "backend='mpi'"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(kwargs, needle):
    args = {"world_size": 2, **kwargs}
    world_size = args.pop("world_size")
    with pytest.raises(ValueError, match="allowed|must|choose") as info:
        cl.launch(workers.allreduce_rank, world_size, **args)
    assert needle in str(info.value)


def test_fn_must_be_callable():
    with pytest.raises(ValueError, match="fn=42 must be callable"):
        cl.launch(42, 2)


@pytest.mark.skipif(
    torch.cuda.device_count() >= 2, reason="needs a machine without 2 GPUs"
)
def test_nccl_without_enough_gpus_is_refused_clearly():
    with pytest.raises(
        ValueError, match="backend='nccl' with world_size=2 needs 2 GPUs"
    ):
        cl.launch(workers.allreduce_rank, 2, backend="nccl")


def test_spawn_refuses_a_function_it_cannot_import():
    with pytest.raises(ValueError, match="move it to a .py file"):
        _launch(lambda rank, world_size: rank, 2, "gloo", 10.0, "spawn", {})
