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

    nb = nbformat.read(lab, as_version=4)
    os.environ["CLUSTERLAB_BOOK_BUILD"] = "1"
    client = NotebookClient(
        nb,
        timeout=timeout_s,
        kernel_name="python3",
        resources={"metadata": {"path": str(lab.parent)}},
    )
    client.execute()
    nbformat.write(nb, out)


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


def _run(lab: Path, folder: Path, timeout_s: float) -> tuple[Path, float, str]:
    out = folder / lab.name
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--one", str(lab), "--out", str(out)]
        + ["--timeout", str(timeout_s)],
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        return lab, seconds, (proc.stderr.strip().splitlines() or ["failed"])[-1]
    return lab, seconds, ""


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
            for lab, seconds, error in runs:
                if error:
                    failed.append(lab.name)
                    print(f"{lab.name:<28} {seconds:6.1f} s  failed: {error}")
                    continue
                print(f"{lab.name:<28} {seconds:6.1f} s", flush=True)
                nb = _with_outputs(lab, Path(tmp) / lab.name)
                store(str(args.cache), nb, str(lab.resolve()), seconds)
    total = time.perf_counter() - start
    print(f"{len(labs) - len(failed)} of {len(labs)} labs in {total:.0f} s", end="")
    print(f"; the build runs again: {', '.join(failed)}" if failed else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
