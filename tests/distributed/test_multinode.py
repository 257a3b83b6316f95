"""Two ``torchrun`` agents on this machine act as two nodes of one job.

This is the multi-node path of the book's "Running the labs" appendix: each node
runs one agent (``--nnodes 2``), the agents meet at a c10d rendezvous on
127.0.0.1, and four ranks (two per node) run the package's ``hello`` script.
The appendix's SLURM script is run too, with stand-ins for ``srun`` and
``scontrol`` that start its two agents on this machine.
"""

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.dist
TIMEOUT_S = 180
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_torchrun_agents_form_one_four_rank_job(no_leftover_processes):
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=2",
        "--nproc-per-node=2",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{port}",
        f"--rdzv-id=book-{port}",
        "--max-restarts=0",
        "-m",
        "clusterlab.message_passing.hello",
    ]
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    nodes = [
        subprocess.Popen(
            cmd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        for _ in range(2)
    ]
    try:
        outputs = [node.communicate(timeout=TIMEOUT_S)[0] for node in nodes]
    finally:
        for node in nodes:  # a failed or timed-out agent takes its ranks along
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, signal.SIGKILL)
            node.wait()
    for node, out in zip(nodes, outputs, strict=True):
        assert node.returncode == 0, out[-3000:]
    _check_four_ranks(outputs)


def _check_four_ranks(outputs):
    lines = re.findall(
        r"rank (\d) of 4 \(\w+, pid \d+\): all-reduce of rank \+ 1 = (\S+)",
        "".join(outputs),
    )
    assert sorted(int(r) for r, _ in lines) == [0, 1, 2, 3], outputs
    # 1 + 2 + 3 + 4: every rank of both nodes took part in the same all-reduce
    assert {total for _, total in lines} == {"10"}
    for out in outputs:  # each agent started two of the four ranks
        assert len(re.findall(r"rank \d of 4", out)) == 2, out[-3000:]


def test_the_sbatch_example_runs_with_stand_ins_for_slurm(
    tmp_path, no_leftover_processes
):
    """srun starts one task per node (here: two local copies), as SLURM would."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_ins = {
        "scontrol": "printf 'localhost\\nlocalhost\\n'",
        "srun": '"$@" > "$OUT/node0.log" 2>&1 & a=$!\n'
        '"$@" > "$OUT/node1.log" 2>&1 & b=$!\n'
        "wait $a && wait $b",
        "torchrun": f'exec "{sys.executable}" -m torch.distributed.run "$@"',
    }
    for name, body in stand_ins.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/bash\n{textwrap.dedent(body)}\n")
        path.chmod(0o755)
    env = dict(
        os.environ,
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        OUT=str(tmp_path),
        SLURM_JOB_NODELIST="localhost",
        SLURM_NNODES="2",
        SLURM_JOB_ID=str(_free_port()),
        RDZV_PORT=str(_free_port()),
        GPUS_PER_NODE="2",
        GLOO_SOCKET_IFNAME="lo",
        OMP_NUM_THREADS="1",
    )
    proc = subprocess.Popen(
        ["bash", str(ROOT / "examples" / "hello.sbatch")],
        env=env,
        start_new_session=True,
    )
    try:
        assert proc.wait(timeout=TIMEOUT_S) == 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    _check_four_ranks([(tmp_path / f"node{i}.log").read_text() for i in (0, 1)])


def test_kill_session_ends_the_agent_and_the_ranks_in_their_own_sessions():
    """torchrun starts each rank in a new session: killing its group is not enough."""
    import psutil

    from clusterlab.core.torchrun import descendants, kill_session, torchrun_env

    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    cmd += ["--nproc-per-node=2", "--no-python", "sleep", "120"]
    agent = subprocess.Popen(
        cmd,
        env=torchrun_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        ranks = []
        for _ in range(600):  # up to 60 s for the agent to start its two ranks
            ranks = []
            for pid in descendants(agent.pid):
                with contextlib.suppress(psutil.Error):
                    if psutil.Process(pid).name() == "sleep":
                        ranks.append(psutil.Process(pid))
            if len(ranks) == 2:
                break
            time.sleep(0.1)
        assert len(ranks) == 2, "the agent did not start its ranks"
        assert all(os.getsid(r.pid) != os.getsid(agent.pid) for r in ranks)
        kill_session(agent)
        gone, alive = psutil.wait_procs(ranks, timeout=10)
        assert not alive, f"ranks outlived the agent: {alive}"
    finally:
        kill_session(agent)
        agent.wait()
        for rank in ranks:  # if the test failed, do not leave them running
            with contextlib.suppress(psutil.Error):
                rank.kill()
