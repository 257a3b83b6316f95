"""Execute the labs a few at a time into a jupyter-cache folder for the book build.

``make book`` runs this first, then builds the book with
``CLUSTERLAB_EXECUTION_CACHE`` naming the folder (``_ext/executed_labs.py``): a
lab whose code is unchanged takes its outputs from the cache, and every chapter
is executed as usual. Each lab runs in its own kernel, started with the
environment the book build gives its kernels (``CLUSTERLAB_BOOK_BUILD=1``). A lab
that fails is left out of the cache, so the build runs it again and reports the
failure in its own words.

    python scripts/execute_labs.py --cache _build/.labs_cache --jobs 2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def execute_one(lab: Path, out: Path, timeout_s: float) -> None:
    """Run one lab in a fresh kernel and write it, outputs included, to ``out``."""
    import nbformat
    from nbclient import NotebookClient

    sys.path.insert(0, str(ROOT / "_ext"))
    from kernel_ports import use_ports_below_the_ephemeral_range

    # Two labs' kernels start at once beside the other lab's connections.
    use_ports_below_the_ephemeral_range()
    nb = nbformat.read(lab, as_version=4)
    os.environ["CLUSTERLAB_BOOK_BUILD"] = "1"
    client = NotebookClient(
        nb,
        timeout=timeout_s,
        kernel_name="python3",
        resources={"metadata": {"path": str(lab.parent)}},
    )
    start = time.perf_counter()
    client.execute()
    nbformat.write(nb, out)
    # Where a slow lab's time went: its slowest cells, from nbclient's stamps,
    # and the kernel's start and stop (the rest of the lab's time).
    slow = _slowest_cells(nb)
    for seconds, index, first in slow:
        print(f"cell {index}: {seconds:.1f} s ({first})")
    outside = time.perf_counter() - start - _cells_seconds(nb)
    if outside > 20.0:
        print(f"{outside:.1f} s outside its cells (the kernel's start and stop)")


def _cell_seconds(cell) -> float | None:
    """How long a code cell ran, from nbclient's stamps (None: not stamped)."""
    from datetime import datetime

    stamps = cell.get("metadata", {}).get("execution", {})
    begin, end = stamps.get("iopub.execute_input"), stamps.get("shell.execute_reply")
    if cell.cell_type != "code" or not (begin and end):
        return None
    span = datetime.fromisoformat(end.replace("Z", "+00:00")) - datetime.fromisoformat(
        begin.replace("Z", "+00:00")
    )
    return span.total_seconds()


def _cells_seconds(nb) -> float:
    return sum(_cell_seconds(c) or 0.0 for c in nb.cells)


def _slowest_cells(nb, at_least_s: float = 20.0, most: int = 3):
    """``(seconds, index, first line)`` of the cells that ran ``at_least_s`` or more."""
    rows = []
    for index, cell in enumerate(nb.cells):
        seconds = _cell_seconds(cell)
        if seconds is not None and seconds >= at_least_s:
            rows.append((seconds, index, cell.source.splitlines()[0][:60]))
    return sorted(rows, reverse=True)[:most]


def _with_outputs(lab: Path, executed: Path):
    """The lab as it is on disk, with the executed copy's outputs.

    The cache finds a notebook by the hash of its code and its kernel spec, and
    a kernel rewrites the spec's display name, so the outputs go back into the
    notebook as read.
    """
    import nbformat

    nb = nbformat.read(lab, as_version=4)
    ran = nbformat.read(executed, as_version=4)
    for cell, done in zip(nb.cells, ran.cells, strict=True):
        if cell.cell_type == "code":
            cell.outputs = done.get("outputs", [])
            cell.execution_count = done.get("execution_count")
    return nb


def _run(lab: Path, folder: Path, timeout_s: float) -> tuple[Path, float, str, str]:
    out = folder / lab.name
    start = time.perf_counter()
    # Files, not pipes: a process the lab left behind keeps a pipe open, and
    # reading it to its end would wait for that process too.
    with tempfile.TemporaryFile("w+") as so, tempfile.TemporaryFile("w+") as se:
        code = subprocess.run(
            [sys.executable, __file__, "--one", str(lab), "--out", str(out)]
            + ["--timeout", str(timeout_s)],
            stdout=so,
            stderr=se,
            text=True,
        ).returncode
        so.seek(0), se.seek(0)
        stdout, stderr = so.read(), se.read()
    seconds = time.perf_counter() - start
    if code != 0:
        error = (stderr.strip().splitlines() or ["failed"])[-1]
        return lab, seconds, error, ""
    return lab, seconds, "", stdout.strip()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/execute_labs.py")
    parser.add_argument("labs", nargs="*", type=Path, help="labs (default: all)")
    parser.add_argument("--cache", type=Path, help="the jupyter-cache folder")
    parser.add_argument("--jobs", type=int, default=2, help="labs at once, in [1, 8]")
    parser.add_argument("--timeout", type=float, default=300.0, help="s per cell")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        execute_one(args.one, args.out, args.timeout)
        return 0
    if not 1 <= args.jobs <= 8:
        parser.error(f"--jobs={args.jobs} must be in [1, 8]")
    if args.cache is None:
        parser.error("--cache is required")
    labs = args.labs or sorted((ROOT / "labs").glob("[0-9][0-9]_*.ipynb"))
    sys.path.insert(0, str(ROOT / "_ext"))
    from executed_labs import store

    args.cache.mkdir(parents=True, exist_ok=True)
    start, failed = time.perf_counter(), []
    with tempfile.TemporaryDirectory(prefix="clusterlab-labs-") as tmp:
        with ThreadPoolExecutor(args.jobs) as pool:
            runs = pool.map(lambda lab: _run(lab, Path(tmp), args.timeout), labs)
            for lab, seconds, error, slow in runs:
                if error:
                    failed.append(lab.name)
                    print(f"{lab.name:<28} {seconds:6.1f} s  failed: {error}")
                    continue
                print(f"{lab.name:<28} {seconds:6.1f} s", flush=True)
                for line in slow.splitlines():  # the lab's slowest cells
                    print(f"{'':<28} {line}", flush=True)
                nb = _with_outputs(lab, Path(tmp) / lab.name)
                store(str(args.cache), nb, str(lab.resolve()), seconds)
    total = time.perf_counter() - start
    print(f"{len(labs) - len(failed)} of {len(labs)} labs in {total:.0f} s", end="")
    print(f"; the build runs again: {', '.join(failed)}" if failed else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
