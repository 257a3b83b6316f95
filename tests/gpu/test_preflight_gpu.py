"""The preflight check on GPUs (skipped without one).

With one GPU: a one-rank NCCL job under torchrun, whose matmul must run in
bfloat16 where the GPU has it. With two: two agents (two "nodes", one GPU
each, ``CUDA_VISIBLE_DEVICES``) on an NCCL job, node 1's clock skewed; the
clock exchange runs on its gloo group and must find the skew within its
bound, and the one rail between the nodes must be measured.
"""

import json
import pathlib
import socket
import subprocess
import sys

import pytest
import torch

import clusterlab as cl
from clusterlab.core.torchrun import agent_command, kill_session, torchrun_env
from clusterlab.debugging.preflight import SKEW_ENV, matmul_dtype

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = pytest.mark.skipif(GPUS == 0, reason="needs a CUDA GPU")
SKEW_S = 0.25
TIMEOUT_S = 240
DISTRIBUTED = pathlib.Path(__file__).parents[1] / "distributed"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _agents(out, nnodes, skew="") -> dict:
    port = _free_port()
    cmd = agent_command(
        "clusterlab.debugging.preflight", "--json", str(out), "--window-s", "0.5",
        nnodes=nnodes, nproc=1, rdzv_id=f"gpu-preflight-{port}",
        rdzv_endpoint=f"127.0.0.1:{port}",
    )  # fmt: skip
    procs = [
        subprocess.Popen(
            cmd,
            env=torchrun_env(CUDA_VISIBLE_DEVICES=str(i), **{SKEW_ENV: skew}),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        for i in range(nnodes)
    ]
    try:
        logs = [p.communicate(timeout=TIMEOUT_S)[0] for p in procs]
    finally:
        for p in procs:
            kill_session(p)
            p.wait()
    assert all(p.returncode == 0 for p in procs), "\n".join(logs)[-4000:]
    return json.loads(out.read_text())


def test_the_matmul_runs_bf16_where_the_gpu_has_it():
    major = torch.cuda.get_device_capability(0)[0]
    want = torch.bfloat16 if major >= 8 else torch.float32
    assert matmul_dtype(torch.device("cuda", 0)) == want


def test_a_one_gpu_preflight_runs_on_nccl(tmp_path):
    rep = _agents(tmp_path / "p.json", 1)
    (row,) = rep["ranks"]
    major = torch.cuda.get_device_capability(0)[0]
    assert row["matmul_dtype"] == ("bfloat16" if major >= 8 else "float32")
    assert row["matmul_flops"] > 1e12, row  # a GPU, not the CPU fallback
    print(f"{torch.cuda.get_device_name(0)}: {row['matmul_flops'] / 1e12:.1f} TFLOP/s")


@pytest.mark.skipif(GPUS < 2, reason="needs two CUDA GPUs")
def test_two_gpu_nodes_clock_and_rail(tmp_path):
    rep = _agents(tmp_path / "p.json", 2, skew=f"1={SKEW_S}")
    offset, bound = rep["clock_offsets_s"]["1"], rep["clock_error_bounds_s"]["1"]
    assert abs(offset - SKEW_S) <= bound + 1e-6, (offset, bound)
    assert bound < 0.05
    assert {(x["src"], x["dst"], x["rail"]) for x in rep["links"]} == {
        (0, 1, 0),
        (1, 0, 0),
    }


@pytest.mark.skipif(GPUS < 2, reason="needs two CUDA GPUs")
def test_the_clock_exchange_on_an_nccl_job_uses_gloo():
    sys.path.insert(0, str(DISTRIBUTED))  # its workers, importable by spawned ranks
    from workers import preflight_clock

    out = cl.launch(preflight_clock, 2, backend="nccl", skew_s=SKEW_S)
    offset, bound = out[0]["found"][1]
    assert abs(offset - SKEW_S) <= bound + 1e-9, (offset, bound)
