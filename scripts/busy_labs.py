"""Run every lab several times beside CPU busy-loops: a busy laptop must not break it.

    .venv/bin/python scripts/busy_labs.py                  # 3 runs, 2 busy loops
    .venv/bin/python scripts/busy_labs.py --runs 1 --labs 01 13 --busy 2

Starts ``--busy`` processes that spin forever (each takes one core while it can),
then runs each lab ``--runs`` times with nbval, cell by cell, exactly as the test
command does, and stops the busy loops whatever happens. A timing check in a lab
that fails because the machine was busy should say so and measure again; a lab
that still fails is counted here. It prints a Markdown table (lab, runs,
failures, median and slowest seconds) and writes it, with the machine and the
command, to ``bench/results/busy_labs.md``. The exit status is the number of
failed runs (0: no spurious failure).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPIN = "while True:\n    pass\n"


def _labs(prefixes: list[str] | None) -> list[Path]:
    labs = sorted(p for p in (ROOT / "labs").glob("[0-9][0-9]_*.ipynb"))
    if prefixes:
        labs = [p for p in labs if any(p.name.startswith(x) for x in prefixes)]
        if not labs:
            raise ValueError(f"labs={prefixes!r} matches no lab in labs/")
    return labs


def _run_lab(lab: Path, timeout_s: float) -> tuple[bool, float, str]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(lab)]
    start = time.perf_counter()
    try:
        done = subprocess.run(
            cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return False, time.perf_counter() - start, f"timed out after {timeout_s:.0f} s"
    tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or [""]
    return done.returncode == 0, time.perf_counter() - start, tail[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each lab")
    parser.add_argument("--busy", type=int, default=2, help="busy loops beside it")
    parser.add_argument("--labs", nargs="*", help="lab number prefixes, e.g. 01 13")
    parser.add_argument("--timeout", type=float, default=600.0, help="s per run")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    if args.runs < 1:
        parser.error(f"--runs={args.runs} must be at least 1")
    if args.busy < 0:
        parser.error(f"--busy={args.busy} must be 0 or more")
    labs = _labs(args.labs)
    spinners = [
        subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.busy)
    ]
    results: dict[str, list[tuple[bool, float, str]]] = {p.stem: [] for p in labs}
    try:
        for run in range(1, args.runs + 1):
            for lab in labs:
                ok, seconds, tail = _run_lab(lab, args.timeout)
                results[lab.stem].append((ok, seconds, tail))
                word = "passed" if ok else f"FAILED ({tail})"
                print(f"run {run}/{args.runs} {lab.stem}: {word} in {seconds:.1f} s")
                sys.stdout.flush()
    finally:
        for p in spinners:
            p.kill()
        for p in spinners:
            p.wait()
    rows = [
        "| lab | runs | failures | median (s) | slowest (s) |",
        "|---|---|---|---|---|",
    ]
    failures = 0
    for name, runs in results.items():
        bad = sum(not ok for ok, _, _ in runs)
        failures += bad
        times = [s for _, s, _ in runs]
        rows.append(
            f"| {name} | {len(runs)} | {bad} | {statistics.median(times):.1f} "
            f"| {max(times):.1f} |"
        )
    table = "\n".join(rows)
    print("\n" + table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    (out / "busy_labs.md").write_text(
        f"# Labs beside {args.busy} busy loops\n\n"
        f"{stamp}; {platform.platform()}; {os.cpu_count()} CPUs; "
        f"`scripts/busy_labs.py --runs {args.runs} --busy {args.busy}`\n\n"
        f"{table}\n\nFailed runs: {failures}\n"
    )
    return failures


if __name__ == "__main__":
    sys.exit(main())
