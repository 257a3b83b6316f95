"""Measure how big each chart output of a lab is, as a kernel writes it.

    .venv/bin/python scripts/measure_outputs.py labs/23_economics labs/16_stragglers

runs each lab with nbclient (as Jupyter would, in a temporary folder; the lab in
the repository is not touched) and prints, for every output that carries a
chart, its size in bytes: the JSON of the output's ``data`` as the saved
notebook would hold it. Outputs of cells and outputs inside widgets (the
``Output`` widgets, saved in the notebook's widget state) are both counted.
``--book`` renders the charts as the book build does (``CLUSTERLAB_BOOK_BUILD=1``:
a ``<div>`` and a call to the site's ``vegaEmbed``), the size each chart adds to
a built page. ``--json PATH`` also writes every size found. The exit status is
non-zero if a lab fails or a chart output is larger than ``--limit-bytes``
(default 50 KB).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT_BYTES = 50_000
CHART_MIMES = (
    "application/vnd.vega.v5+json",
    "application/vnd.vega.v6+json",
    "application/vnd.vegalite.v5+json",
    "application/vnd.vegalite.v6+json",
    "application/vnd.vegalite.v6.json",
)
CHART_HTML_MARKS = ("vegaEmbed", "clusterlab-chart", "vega-embed")


def is_chart(data: dict) -> bool:
    """Whether an output's ``data`` (MIME type -> content) draws a chart."""
    if any(m in data for m in CHART_MIMES):
        return True
    html = data.get("text/html", "")
    html = "".join(html) if isinstance(html, list) else html
    return any(mark in html for mark in CHART_HTML_MARKS)


def output_size_bytes(data: dict) -> int:
    """Bytes of an output's ``data`` as JSON (what a saved notebook stores)."""
    return len(json.dumps(data, ensure_ascii=False).encode())


def chart_outputs(nb) -> list[dict]:
    """Every chart output of an executed notebook: where it is and its size."""
    found = []
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if is_chart(data):
                found.append(_row(f"cell {index}", data))
    state = nb.metadata.get("widgets", {})
    state = state.get("application/vnd.jupyter.widget-state+json", {})
    for model_id, model in state.get("state", {}).items():
        for out in model.get("state", {}).get("outputs", []) or []:
            data = out.get("data", {})
            if is_chart(data):
                found.append(_row(f"widget {model_id[:8]}", data))
    return found


def _row(where: str, data: dict) -> dict:
    return {
        "where": where,
        "bytes": output_size_bytes(data),
        "mimes": sorted(k for k in data if k != "text/plain"),
    }


def run_lab(path: Path, timeout_s: int = 600, allow_errors: bool = False):
    """Execute a copy of ``path`` in a temporary folder; return the notebook.

    The kernel inherits this process's environment (so ``CLUSTERLAB_BOOK_BUILD``
    and ``CLUSTERLAB_RENDERER`` choose how it renders charts).
    """
    import nbclient
    import nbformat

    with tempfile.TemporaryDirectory(prefix="measure-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copy(path, copy)
        nb = nbformat.read(copy, as_version=4)
        # The grader's kernel client polls its channels, so that a cell's reply
        # that arrives among many widget messages is not missed (nbclient#312).
        from clusterlab.course.grade_kernel import ThisPythonKernel

        client = nbclient.NotebookClient(
            nb,
            timeout=timeout_s,
            kernel_name="python3",
            kernel_manager_class=ThisPythonKernel,
            resources={"metadata": {"path": tmp}},
            store_widget_state=True,
            allow_errors=allow_errors,
        )
        client.execute()
    return nb


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("labs", nargs="+", help="e.g. labs/23_economics")
    parser.add_argument("--json", default=None, help="write the sizes here")
    parser.add_argument("--limit-bytes", type=int, default=LIMIT_BYTES)
    parser.add_argument("--book", action="store_true", help="render as the book")
    parser.add_argument(
        "--keep-going", action="store_true", help="run on past failing cells"
    )
    args = parser.parse_args()
    if args.book:
        os.environ["CLUSTERLAB_BOOK_BUILD"] = "1"
    report, too_big, failed = {}, [], []
    for lab in args.labs:
        path = ROOT / (lab if lab.endswith(".ipynb") else f"{lab}.ipynb")
        start = time.perf_counter()
        nb = run_lab(path, allow_errors=args.keep_going)
        errors = [
            o.get("ename", "")
            for c in nb.cells
            for o in c.get("outputs", [])
            if o.get("output_type") == "error"
        ]
        if errors:
            failed.append(path.stem)
            print(f"{path.stem}: cells failed: {', '.join(errors)}")
        rows = chart_outputs(nb)
        sizes = [r["bytes"] for r in rows]
        report[path.stem] = rows
        summary = (
            f"{len(sizes)} chart outputs, median {statistics.median(sizes):,.0f} B, "
            f"largest {max(sizes):,} B"
            if sizes
            else "no chart output"
        )
        print(f"{path.stem}: {summary} ({time.perf_counter() - start:.0f} s)")
        too_big += [(path.stem, r) for r in rows if r["bytes"] > args.limit_bytes]
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    for stem, row in too_big:
        print(f"too big: {stem} {row['where']}: {row['bytes']:,} B {row['mimes']}")
    return 1 if too_big or failed else 0


if __name__ == "__main__":
    sys.exit(main())
