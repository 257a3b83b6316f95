"""Time every lab at SMOKE size, the launchers, and a clean book build.

Run it with ``make bench`` (or ``.venv/bin/python scripts/benchmark.py``). It
prints a Markdown table of (what, seconds, budget) and writes the same table,
with the machine it ran on, to ``bench/results/benchmark.md``. The budgets are
the book's: each lab under 60 s and a clean build under 10 minutes on 2 cores.

Options: ``--skip-book`` (no book build), ``--labs 01 02`` (only those labs),
``--repeat N`` (launch timings averaged over N runs, default 5).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAB_BUDGET_S = 60.0
BUILD_BUDGET_S = 600.0


def trivial(rank: int, world_size: int) -> int:
    """A 2-rank job that does nothing but join the group and return its rank."""
    return rank


def time_launchers(repeat: int) -> list[tuple[str, float, str]]:
    import clusterlab as cl
    from clusterlab.dist.launcher import _launch

    rows = []
    cl.dist.launch(trivial, 2)  # first call pays for imports
    for method in ("fork", "spawn"):
        start = time.perf_counter()
        for _ in range(repeat):
            assert _launch(trivial, 2, "gloo", 60.0, method, {}) == [0, 1]
        label = (
            "cl.dist.launch (fork, the default on CPU)"
            if method == "fork"
            else "cl.dist.launch forced to spawn"
        )
        rows.append(
            (
                f"trivial 2-rank job: {label}",
                (time.perf_counter() - start) / repeat,
                "< 1 s" if method == "fork" else "",
            )
        )
    start = time.perf_counter()
    for _ in range(max(1, repeat // 2)):
        cl.dist.run_torchrun("clusterlab.dist.hello", 2, timeout=120)
    rows.append(
        (
            "trivial 2-rank job: torchrun --standalone",
            (time.perf_counter() - start) / max(1, repeat // 2),
            "",
        )
    )
    return rows


def time_lab(path: Path) -> float:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    start = time.perf_counter()
    client.execute()
    return time.perf_counter() - start


def time_book_build() -> float:
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        subprocess.run(
            [
                str(Path(sys.executable).parent / "jupyter-book"),
                "build",
                ".",
                "-W",
                "-n",
                "--keep-going",
                "--path-output",
                out,
            ],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-book", action="store_true")
    parser.add_argument("--labs", nargs="*", default=None, help="lab numbers, e.g. 01")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    os.environ["CLUSTERLAB_SMOKE"] = "1"

    rows = time_launchers(args.repeat)
    labs = sorted((ROOT / "labs").glob("[0-9][0-9]_*.ipynb"))
    if args.labs:
        labs = [p for p in labs if p.name[:2] in args.labs]
    for lab in labs:
        print(f"running {lab.name} ...", file=sys.stderr, flush=True)
        rows.append(
            (f"lab {lab.stem} (SMOKE)", time_lab(lab), f"< {LAB_BUDGET_S:.0f} s")
        )
    if not args.skip_book:
        print("building the book from clean ...", file=sys.stderr, flush=True)
        rows.append(
            ("clean book build", time_book_build(), f"< {BUILD_BUDGET_S:.0f} s")
        )

    lines = ["| what | seconds | budget |", "|---|---:|---|"]
    lines += [f"| {what} | {secs:.2f} | {budget} |" for what, secs, budget in rows]
    import torch

    machine = (
        f"{platform.platform()}, Python {platform.python_version()}, torch "
        f"{torch.__version__}, {os.cpu_count()} CPU cores, "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )
    table = "\n".join(lines)
    print(table)
    out = ROOT / "bench" / "results" / "benchmark.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"# Benchmark\n\nMeasured on {machine}.\n\n{table}\n")
    print(f"\nwritten to {out.relative_to(ROOT)}", file=sys.stderr)
    over = [
        what
        for what, secs, budget in rows
        if budget.startswith("< ") and secs > float(budget.split()[1])
    ]
    if over:
        print(f"over budget: {over}", file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
