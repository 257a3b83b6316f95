"""The book's measurements on this machine's GPU, in one command, with provenance.

    make gpu-check                                  # every lab, every measurement
    .venv/bin/python scripts/gpu_check.py --labs 05 19 --out gpu_check.csv
    .venv/bin/python scripts/gpu_check.py --quick --labs none   # a minute, any CPU

It measures, and compares with the book's published rows (``data/gpu_specs.csv``):

* bf16 matmul FLOP/s (and fp8 where the GPU has it) against the dense peak;
* a streaming kernel's bandwidth (a large copy: read + write) against HBM's;
* the activation-memory model (``cl.models.activations``, Korthikanti's GPT
  layer with its scores kept) against ``torch.cuda.max_memory_allocated`` for
  a small GPT-style model without, with selective and with full recomputation;
* a one-rank NCCL group through ``cl.launch``'s spawn path;
* ``tests/gpu`` (pytest), and every lab at SMOKE size (nbval), each with the
  backend ``choose_backend`` picks;
* the serving engine's decode tokens/s against its roofline: a decode step
  reads every weight once, so ``requests x bandwidth / weight bytes`` is its
  ceiling, with the bandwidth measured here on the engine's device.

Without a GPU each GPU measurement is a row with status ``skipped`` and the
reason; the rest still runs. Every row carries the provenance (GPU, driver,
CUDA, torch, NCCL, date, command). Results go to ``--out`` (CSV, default
``_build/gpu_check/gpu_check.csv``) and a JSON twin beside it; the exit status
is the number of rows that failed.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ["check", "value", "unit", "reference", "ratio", "status", "note"]
PROVENANCE = ["gpu", "driver", "cuda", "torch", "nccl", "date", "command"]
NO_GPU = "skipped: no CUDA GPU visible (torch.cuda.is_available() is False)"


def provenance(argv: list[str]) -> dict:
    """What the numbers were measured on, and by which command."""
    gpu = cuda = nccl = driver = "none"
    if torch.cuda.is_available():
        gpu = f"{torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
        cuda = str(torch.version.cuda)
        try:
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except (AttributeError, RuntimeError, TypeError):
            nccl = "unknown"
        if shutil.which("nvidia-smi"):
            q = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
            out = subprocess.run(q, capture_output=True, text=True, check=False)
            driver = out.stdout.strip().splitlines()[0] if out.stdout.strip() else "?"
    return {
        "gpu": gpu,
        "driver": driver,
        "cuda": cuda,
        "torch": torch.__version__,
        "nccl": nccl,
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join(["scripts/gpu_check.py", *argv]),
        "host": platform.node(),
    }


def published_part(device_name: str):
    """The row of ``data/gpu_specs.csv`` for this GPU, or None if it has none."""
    import clusterlab as cl

    specs = cl.published.load("gpu_specs")
    name = device_name.upper()
    found = [r for _, r in specs.iterrows() if r["part"].split()[0].upper() in name]
    for r in found:  # the form factor the name says, else the first (SXM)
        if str(r["form_factor"]).upper() in name:
            return r
    return found[0] if found else None


def row(check, value=None, unit="", reference=None, status="measured", note=""):
    ratio = value / reference if value and reference else None
    return dict(check=check, value=value, unit=unit, reference=reference,
                ratio=ratio, status=status, note=note)  # fmt: skip


def _timed(fn, sync, reps: int) -> float:
    fn()
    sync()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def matmul_rows(spec, quick: bool) -> list[dict]:
    """bf16 (and fp8) matmul FLOP/s against the published dense peaks."""
    if not torch.cuda.is_available():
        return [row("matmul bf16", status="skipped", note=NO_GPU),
                row("matmul fp8", status="skipped", note=NO_GPU)]  # fmt: skip
    n = 4096 if quick else 8192
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in "ab")
    t = _timed(lambda: [a @ b for _ in range(10)], torch.cuda.synchronize, 5) / 10
    peak = None if spec is None else float(spec["bf16_dense_flops"])
    out = [row("matmul bf16", 2 * n**3 / t, "FLOP/s", peak, note=f"n={n}")]
    if torch.cuda.get_device_capability(0) < (8, 9) or not hasattr(torch, "_scaled_mm"):
        out.append(row("matmul fp8", status="skipped", note="skipped: no fp8 here"))
        return out
    fa = a.to(torch.float8_e4m3fn)
    fb = b.to(torch.float8_e4m3fn).t().contiguous().t()  # column-major, as needed
    one = torch.ones((), device="cuda")
    mm = lambda: torch._scaled_mm(fa, fb, one, one, out_dtype=torch.bfloat16)  # noqa: E731
    t = _timed(lambda: [mm() for _ in range(10)], torch.cuda.synchronize, 5) / 10
    peak = None if spec is None else float(spec["fp8_dense_flops"])
    out.append(row("matmul fp8", 2 * n**3 / t, "FLOP/s", peak, note=f"n={n}, e4m3"))
    return out


def stream_Bps(device: str, nbytes: int) -> float:
    """Bytes/s of a large copy (each byte read once and written once)."""
    x = torch.ones(nbytes // 4, device=device)
    y = torch.empty_like(x)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    return 2 * nbytes / _timed(lambda: y.copy_(x), sync, 10)


def bandwidth_rows(spec, quick: bool) -> list[dict]:
    cpu = row("stream copy, CPU", stream_Bps("cpu", 1 << 26), "B/s",
              note="64 MiB; the serving roofline's CPU bandwidth")  # fmt: skip
    if not torch.cuda.is_available():
        return [cpu, row("stream copy, HBM", status="skipped", note=NO_GPU)]
    size = 1 << (28 if quick else 31)
    peak = None if spec is None else float(spec["hbm_bandwidth_Bps"])
    hbm = row("stream copy, HBM", stream_Bps("cuda", size), "B/s", peak,
              note=f"{size >> 20} MiB")  # fmt: skip
    return [cpu, hbm]


def nccl_row() -> dict:
    """A one-rank NCCL group through cl.launch's spawn path."""
    if not torch.cuda.is_available():
        return row("one-rank NCCL group via cl.launch", status="skipped", note=NO_GPU)
    from gpu_check_workers import one_rank_all_reduce

    import clusterlab as cl

    got = cl.launch(one_rank_all_reduce, 1, backend="nccl", timeout=120)[0]
    ok = got == {"backend": "nccl", "sum": 1.0}
    return row("one-rank NCCL group via cl.launch", status="pass" if ok else "fail",
               note=str(got))  # fmt: skip


#: Measured over model within which the activation model passes: autograd
#: also keeps contiguous copies of attention's transposed operands, which the
#: model leaves out (measured: 1.09 without, 1.06 with selective, 1.00 with
#: full recomputation, counted on a CPU).
MEMORY_BOUNDS = (0.8, 1.25)


def memory_verdict(measured: float, model: float) -> str:
    """``"pass"`` when measured / model lies within ``MEMORY_BOUNDS``, else fail."""
    low, high = MEMORY_BOUNDS
    return "pass" if model > 0 and low <= measured / model <= high else "fail"


def memory_rows(quick: bool) -> list[dict]:
    """The activation model against saved tensors (any device) and the allocator."""
    from gpu_check_workers import activation_bytes, model_bytes, saved_bytes

    small = dict(hidden=256, seq_len=128, batch=2, heads=4, layers=2)
    out = []
    for mode in ("none", "selective", "full"):
        measured, model = saved_bytes(mode, **small), model_bytes(mode, **small)
        out.append(row(f"activations saved, CPU, recompute={mode}", measured, "B",
                       model, memory_verdict(measured, model),
                       f"saved_tensors_hooks, bf16; {small}"))  # fmt: skip
    if not torch.cuda.is_available():
        modes = ("none", "selective", "full")
        gpu = [f"activations, GPU, recompute={m}" for m in modes]
        return out + [row(name, status="skipped", note=NO_GPU) for name in gpu]
    shape = dict(hidden=512, seq_len=512, batch=2, heads=8, layers=2)
    if not quick:
        shape = dict(hidden=1024, seq_len=1024, batch=4, heads=16, layers=4)
    for mode in ("none", "selective", "full"):
        measured, model, peak = activation_bytes(mode, "cuda", **shape)
        note = (f"kept after forward (memory_allocated) vs the model; peak over "
                f"forward and backward (max_memory_allocated) {peak / 1e6:.1f} MB; "
                f"{shape}")  # fmt: skip
        out.append(row(f"activations, GPU, recompute={mode}", measured, "B", model,
                       memory_verdict(measured, model), note))  # fmt: skip
    return out


def serving_row(quick: bool) -> dict:
    """Decode tokens/s of the serving engine against weights bytes / bandwidth."""
    from gpu_check_workers import decode_tokens_per_s

    measured, weight_bytes, requests = decode_tokens_per_s(quick)
    bw = stream_Bps("cpu", 1 << 26)
    ceiling = requests * bw / weight_bytes
    return row("serving decode, tokens/s", measured, "tokens/s", ceiling,
               note=f"{requests} requests, {weight_bytes / 1e6:.1f} MB of weights; "
               "on the CPU: the engine keeps its KV cache on the CPU")  # fmt: skip


def pytest_row(target: str, name: str, timeout_s: float) -> dict:
    """Run pytest on ``target``; pass, fail, or skipped as pytest says."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", target]
    t0 = time.monotonic()
    env = {**os.environ, "CLUSTERLAB_SMOKE": "1"}
    try:
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                             timeout=timeout_s, env=env)  # fmt: skip
    except subprocess.TimeoutExpired:
        return row(name, status="fail", note=f"timed out after {timeout_s:.0f} s")
    last = (out.stdout.strip().splitlines() or ["?"])[-1]
    status = "fail" if out.returncode not in (0, 5) else "pass"
    if out.returncode == 0 and "passed" not in last:
        status = "skipped"
    return row(name, time.monotonic() - t0, "s", status=status, note=last[-200:])


def lab_rows(which: list[str], timeout_s: float) -> list[dict]:
    from clusterlab.core.backend import choose_backend

    labs = sorted((ROOT / "labs").glob("[0-9][0-9]_*.ipynb"))
    if which != ["all"]:
        labs = [p for p in labs if any(p.name.startswith(w) for w in which)]
    backend = choose_backend(2, verbose=False)
    rows = [row(f"lab {p.stem}", status="pending") for p in labs]
    for i, p in enumerate(labs):
        rows[i] = pytest_row(f"labs/{p.name}", f"lab {p.stem}", timeout_s)
        rows[i]["note"] = f"backend for 2 ranks: {backend}; " + rows[i]["note"]
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="scripts/gpu_check.py")
    p.add_argument("--labs", nargs="+", default=["all"],
                   help="'all' (default), 'none', or lab number prefixes")  # fmt: skip
    p.add_argument("--quick", action="store_true", help="small sizes, no tests/gpu")
    p.add_argument("--out", type=Path, default=ROOT / "_build/gpu_check/gpu_check.csv")
    p.add_argument("--lab-timeout-s", type=float, default=300.0)
    args = p.parse_args(argv)
    if not 0 < args.lab_timeout_s <= 3600:
        raise ValueError(f"--lab-timeout-s={args.lab_timeout_s} must be in (0, 3600]")
    sys.path.insert(0, str(Path(__file__).parent))
    prov = provenance(argv)
    spec = published_part(prov["gpu"]) if torch.cuda.is_available() else None
    rows = [*matmul_rows(spec, args.quick), *bandwidth_rows(spec, args.quick)]
    rows += [*memory_rows(args.quick), nccl_row(), serving_row(args.quick)]
    if not args.quick:
        rows.append(pytest_row("tests/gpu", "tests/gpu", 1200.0))
    else:
        rows.append(row("tests/gpu", status="skipped", note="skipped: --quick"))
    if args.labs != ["none"]:
        rows += lab_rows(args.labs, args.lab_timeout_s)
    part = "none" if spec is None else spec["part"]
    for r in rows:
        r.update({k: prov[k] for k in PROVENANCE}, published_part=part)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=[*COLUMNS, "published_part", *PROVENANCE])
        w.writeheader()
        w.writerows(rows)
    args.out.with_suffix(".json").write_text(
        json.dumps({"provenance": prov, "rows": rows}, indent=1, default=str)
    )
    for r in rows:
        value = "" if r["value"] is None else f"{r['value']:.4g} {r['unit']}"
        ratio = "" if r["ratio"] is None else f" ({r['ratio']:.0%} of reference)"
        print(f"{r['status']:>8}  {r['check']:<40} {value}{ratio}  {r['note']}")
    print(f"written: {args.out} ({prov['gpu']}, torch {prov['torch']})")
    return sum(r["status"] == "fail" for r in rows)


if __name__ == "__main__":
    sys.exit(main())
