"""The preflight check under torchrun: two agents play two nodes of one job.

One rank is slowed from outside its process (SIGSTOP/SIGCONT on a duty cycle,
as a throttled or shared GPU would be), and node 1's clock is skewed through
the documented test variable. The preflight must flag that rank and only it,
report node 1's offset within the error bound it states, and test each rail:
local rank i of one node with local rank i of the other.
"""

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time

import psutil
import pytest

from clusterlab.core.torchrun import agent_command, kill_session, torchrun_env
from clusterlab.debugging.preflight import SKEW_ENV

pytestmark = [pytest.mark.timing, pytest.mark.dist]
SKEW_S = 0.25
SLOW_RANK = 3
TIMEOUT_S = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_pid(agents, rank, deadline):
    """The pid of the preflight process with RANK=rank, once it exists."""
    while time.monotonic() < deadline:
        for agent in agents:
            with contextlib.suppress(psutil.Error):
                for child in psutil.Process(agent.pid).children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        if child.environ().get("RANK") == str(rank):
                            return child.pid
        time.sleep(0.05)
    return None


def _wait_for_group(pid, deadline, peers=3):
    """Wait until the rank holds TCP connections to its peers: init is done.

    Pausing it earlier would slow its start-up (importing torch) past the
    group's init timeout instead of slowing the measurement.
    """
    while time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            conns = psutil.Process(pid).net_connections(kind="tcp")
            if sum(c.status == psutil.CONN_ESTABLISHED for c in conns) > peers:
                return True
        time.sleep(0.02)
    return False


def _duty_cycle(pid, stop, stopped_s=0.25, running_s=0.02):
    """Pause the process most of the time until told to stop, then resume it.

    Long pauses: on a busy machine this thread's short sleeps overrun by tens of
    milliseconds, which would let the rank run far more than intended.
    """
    while not stop.is_set():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
        time.sleep(stopped_s)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
        time.sleep(running_s)


def _run_preflight(out) -> tuple[dict, str]:
    """Two agents, rank 3 slowed from outside, node 1's clock skewed: the report."""
    port = _free_port()
    cmd = agent_command(
        "clusterlab.debugging.preflight",
        "--json",
        str(out),
        "--window-s",
        "1.0",
        nnodes=2,
        nproc=2,
        rdzv_id=f"preflight-{port}",
        rdzv_endpoint=f"127.0.0.1:{port}",
    )
    env = torchrun_env(**{SKEW_ENV: f"1={SKEW_S}"})
    agents = [
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
    stop = threading.Event()
    slower = None
    try:
        pid = _rank_pid(agents, SLOW_RANK, time.monotonic() + TIMEOUT_S)
        assert pid is not None, "rank 3 never started"
        assert _wait_for_group(pid, time.monotonic() + TIMEOUT_S), "no group formed"
        slower = threading.Thread(target=_duty_cycle, args=(pid, stop), daemon=True)
        slower.start()
        logs = [a.communicate(timeout=TIMEOUT_S)[0] for a in agents]
    finally:
        stop.set()
        if slower is not None:
            slower.join()
        for agent in agents:
            kill_session(agent)
            agent.wait()
    assert all(a.returncode == 0 for a in agents), "\n".join(logs)[-3000:]
    return json.loads(out.read_text()), "".join(logs)


def test_preflight_flags_the_slowed_rank_and_reports_the_injected_offset(
    tmp_path, no_leftover_processes
):
    """The slowed rank, and only it, is flagged (the test runs alone: it is
    marked timing, and make test runs those after every other test)."""
    rep, logs = _run_preflight(tmp_path / "preflight.json")
    flops = {r["rank"]: round(r["matmul_flops"] / 1e9, 2) for r in rep["ranks"]}
    assert rep["slow_ranks"] == [SLOW_RANK], flops
    offset, bound = rep["clock_offsets_s"]["1"], rep["clock_error_bounds_s"]["1"]
    assert abs(offset - SKEW_S) <= bound + 1e-6, (offset, bound)
    assert bound < 0.05  # a loopback round trip: milliseconds at most
    assert "preflight of 4 ranks" in logs
    # every rail crosses the fabric: local rank i of node 0 <-> local rank i of 1
    pairs = {(x["src"], x["dst"], x["rail"]) for x in rep["links"]}
    assert pairs == {(0, 2, 0), (1, 3, 1), (2, 0, 0), (3, 1, 1)}, pairs
    assert {r["matmul_dtype"] for r in rep["ranks"]} == {"float32"}  # on CPUs
