"""Two ``torchrun`` agents on this machine act as two nodes of one job.

This is the multi-node path of the book's "Running the labs" appendix: each node
runs one agent (``--nnodes 2``), the agents meet at a c10d rendezvous on
127.0.0.1, and four ranks (two per node) run the package's ``hello`` script.
"""

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys

import pytest

pytestmark = pytest.mark.dist
TIMEOUT_S = 180


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
        "clusterlab.dist.hello",
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
    lines = re.findall(
        r"rank (\d) of 4 \(\w+, pid \d+\): all-reduce of rank \+ 1 = (\S+)",
        "".join(outputs),
    )
    assert sorted(int(r) for r, _ in lines) == [0, 1, 2, 3], outputs
    # 1 + 2 + 3 + 4: every rank of both nodes took part in the same all-reduce
    assert {total for _, total in lines} == {"10"}
    for out in outputs:  # each agent started two of the four ranks
        assert len(re.findall(r"rank \d of 4", out)) == 2, out[-3000:]
