"""``scripts/gpu_check.py`` runs on a CPU: it says what it skips and why, measures
what a CPU can, and writes its rows with their provenance.

The full run (every lab, ``tests/gpu``) is for a reader's GPU machine; here the
quick run with no labs, and one lab by its prefix, keep the test short.
"""

import csv
import importlib.util
import json
import subprocess
import sys

import pytest
import torch

from book_helpers import ROOT

pytestmark = pytest.mark.dist

SCRIPT = ROOT / "scripts" / "gpu_check.py"
GPU = torch.cuda.is_available()


def _module(name):
    sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location(name, SCRIPT.parent / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(tmp_path, *args):
    out = tmp_path / "gpu_check.csv"
    cmd = [sys.executable, str(SCRIPT), "--quick", "--out", str(out), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    rows = list(csv.DictReader(out.open())) if out.exists() else []
    return done, {r["check"]: r for r in rows}, out


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("gpu_check"), "--labs", "none")


def test_the_quick_run_writes_every_row_with_its_provenance(quick):
    done, rows, out = quick
    assert done.returncode == 0, done.stdout + done.stderr
    for r in rows.values():
        assert r["torch"] == torch.__version__ and r["date"].endswith("Z")
        assert r["command"].startswith("scripts/gpu_check.py --quick")
        assert r["status"] in ("measured", "pass", "skipped"), r
    saved = json.loads(out.with_suffix(".json").read_text())
    assert saved["provenance"]["torch"] == torch.__version__
    assert len(saved["rows"]) == len(rows) and f"written: {out}" in done.stdout


@pytest.mark.skipif(GPU, reason="checks what a CPU-only run says")
def test_on_a_cpu_it_says_what_it_skips_and_why(quick):
    _, rows, _ = quick
    gpu_only = [
        "matmul bf16",
        "matmul fp8",
        "stream copy, HBM",
        "activations, GPU, recompute=full",
        "one-rank NCCL group via cl.launch",
    ]
    for name in gpu_only:
        assert rows[name]["status"] == "skipped", rows[name]
        assert "no CUDA GPU visible" in rows[name]["note"]
    assert rows["tests/gpu"]["note"] == "skipped: --quick"
    assert (
        rows["matmul bf16"]["gpu"] == "none" and rows["matmul bf16"]["nccl"] == "none"
    )
    assert float(rows["stream copy, CPU"]["value"]) > 1e8
    assert float(rows["serving decode, tokens/s"]["value"]) > 0
    for mode in ("none", "selective", "full"):
        assert rows[f"activations saved, CPU, recompute={mode}"]["status"] == "pass"


def test_the_memory_verdict_fails_a_wrong_model():
    check = _module("gpu_check")
    workers = _module("gpu_check_workers")
    shape = dict(hidden=256, seq_len=128, batch=2, heads=4, layers=2)
    saved = workers.saved_bytes("none", **shape)
    assert check.memory_verdict(saved, workers.model_bytes("none", **shape)) == "pass"
    # the flash formula leaves out the scores this layer keeps: far too small
    wrong = workers.model_bytes("none", formula="flash", **shape)
    assert check.memory_verdict(saved, wrong) == "fail"
    # full recomputation's model for a run without it: far too small as well
    assert check.memory_verdict(saved, workers.model_bytes("full", **shape)) == "fail"


def test_a_lab_is_run_by_its_prefix_and_a_bad_timeout_is_refused(tmp_path):
    done, rows, _ = _run(tmp_path, "--labs", "14")  # one of the quickest labs
    labs = [name for name in rows if name.startswith("lab ")]
    assert len(labs) == 1 and labs[0].startswith("lab 14_"), labs
    assert rows[labs[0]]["status"] == "pass", rows[labs[0]]
    assert "backend for 2 ranks: gloo" in rows[labs[0]]["note"] or GPU
    bad = subprocess.run(
        [sys.executable, str(SCRIPT), "--lab-timeout-s", "0"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert bad.returncode != 0 and "--lab-timeout-s=0.0" in bad.stderr
