"""``scripts/gpu_check.py --quick`` on a GPU: its GPU rows measure and pass
(skipped without a GPU; ``tests/distributed/test_gpu_check.py`` runs it on CPUs)."""

import csv
import subprocess
import sys

import pytest
import torch

from book_helpers import ROOT

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU"
)


def test_the_quick_gpu_check_measures_the_gpu(tmp_path):
    out = tmp_path / "g.csv"
    cmd = [sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--quick"]
    done = subprocess.run([*cmd, "--labs", "none", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {r["check"]: r for r in csv.DictReader(out.open())}
    assert rows["matmul bf16"]["status"] == "measured"
    assert rows["one-rank NCCL group via cl.launch"]["status"] == "pass"
    for mode in ("none", "selective", "full"):
        assert rows[f"activations, GPU, recompute={mode}"]["status"] == "pass"
    if rows["matmul bf16"]["published_part"] != "none":  # a GPU the book lists
        assert 0.2 < float(rows["matmul bf16"]["ratio"]) < 1.1, rows["matmul bf16"]
        hbm = rows["stream copy, HBM"]
        assert 0.3 < float(hbm["ratio"]) < 1.1, hbm
    assert rows["matmul bf16"]["cuda"] == str(torch.version.cuda)
