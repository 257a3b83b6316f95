"""NCCL's own debugging tools, on machines with CUDA GPUs (skipped elsewhere).

Each test runs a small script in a fresh Python process, so that the NCCL and
PyTorch variables it sets are in the environment before NCCL and
``torch.distributed`` read them, as they would be under ``torchrun``:

* ``NCCL_DEBUG=INFO`` prints NCCL's set-up (version, transports, rings);
* the flight recorder (``TORCH_NCCL_TRACE_BUFFER_SIZE``) keeps each collective
  with its sequence number and state, and ``_dump_fr_trace`` returns it;
* with two GPUs, a rank that skips an all-reduce is caught by the watchdog
  (``TORCH_NCCL_ASYNC_ERROR_HANDLING``) within the timeout, and with
  ``TORCH_NCCL_DUMP_ON_TIMEOUT`` each rank writes its flight record to a file.
"""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = pytest.mark.skipif(GPUS == 0, reason="needs a CUDA GPU")

_ONE_RANK = """
import os, pickle, sys, torch, torch.distributed as dist
from datetime import timedelta
torch.cuda.set_device(0)
dist.init_process_group("nccl", init_method="file://" + sys.argv[1], rank=0,
                        world_size=1, timeout=timedelta(seconds=30),
                        device_id=torch.device("cuda", 0))
x = torch.ones(1 << 20, device="cuda")
for _ in range(3):
    dist.all_reduce(x)
torch.cuda.synchronize()
if os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE"):
    import torch._C._distributed_c10d as c10d
    trace = pickle.loads(c10d._dump_fr_trace())
    for e in trace["entries"]:
        print("FR", e["profiling_name"], e["collective_seq_id"], e["state"])
dist.destroy_process_group()
"""

_SKIPPER = """
import os, sys, torch, torch.distributed as dist
from datetime import timedelta
rank = int(sys.argv[2])
torch.cuda.set_device(rank)
dist.init_process_group("nccl", init_method="file://" + sys.argv[1], rank=rank,
                        world_size=2, timeout=timedelta(seconds=5),
                        device_id=torch.device("cuda", rank))
x = torch.ones(1024, device="cuda")
dist.all_reduce(x)
if rank == 0:
    dist.all_reduce(x)  # rank 1 skips this one
torch.cuda.synchronize()
print("rank", rank, "finished", flush=True)
import time; time.sleep(60)  # rank 1 waits here; the watchdog ends rank 0
"""


def _env(**extra):
    return dict(os.environ, **extra)


def _run(script, *args, env, timeout=120):
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_nccl_debug_info_prints_the_set_up(tmp_path):
    out = _run(_ONE_RANK, tmp_path / "store", env=_env(NCCL_DEBUG="INFO"))
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout + out.stderr
    assert "NCCL INFO" in text and "NCCL version" in text


def test_the_flight_recorder_keeps_each_collective(tmp_path):
    out = _run(
        _ONE_RANK, tmp_path / "store", env=_env(TORCH_NCCL_TRACE_BUFFER_SIZE="100")
    )
    assert out.returncode == 0, out.stderr[-2000:]
    entries = [
        line.split() for line in out.stdout.splitlines() if line.startswith("FR")
    ]
    reduces = [e for e in entries if e[1] == "nccl:all_reduce"]
    assert len(reduces) == 3, out.stdout
    assert [int(e[2]) for e in reduces] == sorted(int(e[2]) for e in reduces)
    assert all(e[3] == "completed" for e in reduces), entries


@pytest.mark.skipif(GPUS < 2, reason="a hang needs two ranks, one GPU each")
def test_the_watchdog_ends_a_skipped_collective_and_dumps_the_record(tmp_path):
    env = _env(
        TORCH_NCCL_ASYNC_ERROR_HANDLING="1",
        TORCH_NCCL_TRACE_BUFFER_SIZE="100",
        TORCH_NCCL_DUMP_ON_TIMEOUT="1",
        TORCH_NCCL_DEBUG_INFO_TEMP_FILE=str(tmp_path / "nccl_trace_rank_"),
        TORCH_FR_DUMP_TEMP_FILE=str(tmp_path / "nccl_trace_rank_"),
    )
    store = tmp_path / "store"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(_SKIPPER), str(store), str(r)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        for r in (0, 1)
    ]
    try:
        log0 = procs[0].communicate(timeout=90)[0]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert procs[0].returncode != 0, log0[-2000:]
    assert "Watchdog caught collective operation timeout" in log0, log0[-3000:]
    assert any(f.name.startswith("nccl_trace_rank_0") for f in tmp_path.iterdir())
