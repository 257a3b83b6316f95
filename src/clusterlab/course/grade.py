"""The course's autograder: run each submitted lab and collect its checks' results.

    python -m clusterlab.course.grade SUBMISSIONS_DIR --out GRADEBOOK.csv
        [--html SUMMARY.html] [--labs labs] [--lab NN_slug ...]
        [--timeout 120] [--jobs 1] [--notebooks DIR]

Submissions are laid out as ``SUBMISSIONS_DIR/<student>/<lab file name>.ipynb``
(a Colab download named ``Copy of 05_ring_allreduce.ipynb`` counts as that lab).
Each notebook runs top to bottom in a fresh kernel of this Python, in a session
and a temporary working folder of its own, under a time limit for the whole
notebook (``--timeout``, seconds, kernel start included). When the limit runs
out, everything the notebook started (the kernel and any ranks it forked) is
killed, and the checks not reached are marked ``timeout``. Nothing is fetched:
pip is told to use no index, and the labs' setup cell installs only on Colab.

The exercise checks report through the checks' record (a JSON line per
event, see ``clusterlab.core.checks``), not through printed text. The
gradebook has one row per student, lab and check, with the columns ``student,
lab, check, status, detail, elapsed_s, notebook``; ``status`` is ``pass``,
``fail`` (``detail`` holds the hint), ``not attempted``, ``error`` or
``timeout``. A row whose check is ``(notebook)`` says whether the notebook
itself ran to its end. The checks a lab should have are read from the lab
itself in ``--labs`` (default ``labs/``), so a deleted check call still shows.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

from clusterlab.core.checks import RESULTS_ENV
from clusterlab.course import grade_procs as procs
from clusterlab.course import grade_report as report
from clusterlab.course.editions import check_calls

#: Seconds a notebook may run, kernel start included, unless ``--timeout`` says.
DEFAULT_TIMEOUT_S = 120.0


#: Set to a fresh value for each run; every process it starts inherits it.
TOKEN_ENV = "CLUSTERLAB_GRADE_RUN"


RUNNER = Path(__file__).with_name("grade_kernel.py")


_LAB_NAME = re.compile(r"\d\d_[A-Za-z0-9_]+")


def lab_of(filename: str, known: list[str]) -> str:
    """The lab a submitted file is: its stem, or the known lab its name contains."""
    stem = Path(filename).stem
    if stem in known:
        return stem
    inside = [lab for lab in known if lab in stem]
    if inside:
        return max(inside, key=len)
    found = _LAB_NAME.search(stem)
    return found.group(0) if found else stem


def students_in(root: Path) -> list[str]:
    """The student folders under ``root`` (hidden and ``_`` folders skipped)."""
    return sorted(
        p.name
        for p in Path(root).iterdir()
        if p.is_dir() and not p.name.startswith((".", "_"))
    )


def find_submissions(root: Path, known: list[str]) -> dict[tuple[str, str], Path]:
    """``{(student, lab): notebook}`` under ``root/<student>/``; the newest wins."""
    found: dict[tuple[str, str], Path] = {}
    for student in students_in(root):
        notebooks = (Path(root) / student).glob("*.ipynb")
        for nb in sorted(notebooks, key=lambda p: (p.stat().st_mtime, p.name)):
            found[(student, lab_of(nb.name, known))] = nb
    return found


def expected_checks(notebook: Path) -> list[str]:
    """The checks a notebook calls, in order, each once."""
    try:
        nb = nbformat.read(notebook, as_version=4)
    except Exception:  # an unreadable notebook calls nothing
        return []
    names = [
        n for c in nb.cells if c.cell_type == "code" for n in check_calls(c.source)
    ]
    return list(dict.fromkeys(names))


def _cells(path: Path) -> list:
    try:
        return nbformat.read(path, as_version=4).cells
    except Exception:  # the run reports why it cannot be read
        return []


#: Names the student whose notebook runs (labs that draw a case per student).
STUDENT_ENV = "CLUSTERLAB_STUDENT"


def run_notebook(
    path: Path,
    timeout_s: float,
    executed: Path | None = None,
    student: str | None = None,
):
    """Run one notebook in a fresh kernel under ``timeout_s``; return a ``Run``.

    Args:
        path: the submitted notebook.
        timeout_s: the limit for the whole notebook, kernel start included.
        executed: where to save the notebook with its outputs (optional).
        student: whose notebook it is: the kernel gets it as
            ``$CLUSTERLAB_STUDENT``, so a case drawn per student (the debugging
            lab's mystery) is drawn for this one.
    """
    try:
        sources = [c.source for c in nbformat.read(path, as_version=4).cells]
    except Exception as err:
        return report.Run(timeout_s, problem=f"the notebook cannot be read: {err}")
    token = uuid.uuid4().hex
    with tempfile.TemporaryDirectory(prefix="clusterlab-grade-") as tmp:
        tmp = Path(tmp)
        (tmp / "work").mkdir()
        cells_log, checks_log, out_nb = (
            tmp / "cells.jsonl",
            tmp / "checks.jsonl",
            tmp / "out.ipynb",
        )
        env = {
            **os.environ,
            RESULTS_ENV: str(checks_log),
            TOKEN_ENV: token,
            "PIP_NO_INDEX": "1",  # no download, even if a cell asks for one
            "CLUSTERLAB_SMOKE": os.environ.get("CLUSTERLAB_SMOKE", "1"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "TMPDIR": str(tmp / "work"),  # what the notebook leaves goes with it
            "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),  # the kernel's connection
        }
        if student:
            env[STUDENT_ENV] = student
        argv = [sys.executable, "-P", str(RUNNER), str(path), str(out_nb)]
        argv += [str(cells_log), str(tmp / "work")]
        start = time.monotonic()
        with open(tmp / "runner.log", "wb") as log:
            proc = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
            try:
                proc.wait(timeout=timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
            procs.stop_everything(proc.pid if timed_out else None, TOKEN_ENV, token)
            proc.wait()
        elapsed = time.monotonic() - start
        tail = (tmp / "runner.log").read_text(errors="replace").strip().splitlines()
        run = report.Run.from_logs(
            timeout_s,
            cells_log,
            checks_log,
            elapsed_s=elapsed,
            timed_out=timed_out,
            sources=sources,
        )
        if not run.ready and not timed_out:
            run.problem = "the kernel did not start: " + (tail[-1] if tail else "?")
        if executed is not None and out_nb.exists():
            executed.parent.mkdir(parents=True, exist_ok=True)
            _mark_not_run(out_nb, executed, run)
    return run


def _mark_not_run(source: Path, target: Path, run) -> None:
    """Copy the executed notebook, with a note in each code cell that did not run."""
    nb = nbformat.read(source, as_version=4)
    note = run.stopped()
    for index, cell in enumerate(nb.cells):
        state = run.cells.get(index, {"event": "start"})
        if cell.cell_type == "code" and state["event"] == "start" and not run.finished:
            cell.outputs.append(
                nbformat.v4.new_output("stream", name="stderr", text=note)
            )
    nbformat.write(nb, target)


def grade(
    submissions: Path,
    labs: Path | None = None,
    only: list[str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    jobs: int = 1,
    notebooks: Path | None = None,
) -> list[dict]:
    """Grade every submission; return the gradebook's rows (see the module docstring).

    Args:
        submissions: the folder of ``<student>/<lab>.ipynb``.
        labs: the folder of the reference labs, which say what checks to expect.
        only: grade only these labs (file names without ``.ipynb``).
        timeout_s: seconds per notebook, kernel start included; > 0.
        jobs: notebooks run at the same time; >= 1.
        notebooks: where to keep each executed notebook (optional).
    """
    if not timeout_s > 0:
        raise ValueError(f"timeout_s={timeout_s!r} must be > 0 seconds")
    if not (isinstance(jobs, int) and jobs >= 1):
        raise ValueError(f"jobs={jobs!r} must be an integer >= 1")
    refs = {p.stem: p for p in sorted(labs.glob("*.ipynb"))} if labs else {}
    found = find_submissions(Path(submissions), list(refs))
    lab_names = only or sorted({lab for _, lab in found})
    students = students_in(submissions)

    def one(key):
        student, lab = key
        expected = expected_checks(refs[lab]) if lab in refs else []
        path = found.get(key)
        if path is None:
            rows = report.missing(expected)
            return [dict(r, student=student, lab=lab) for r in rows]
        calls: dict[str, list[int]] = {}
        for i, cell in enumerate(_cells(path)):
            if cell.cell_type == "code":
                for name in check_calls(cell.source):
                    calls.setdefault(name, []).append(i)
        expected = expected or list(calls)
        out = notebooks / student / f"{lab}.ipynb" if notebooks else None
        run = run_notebook(path, timeout_s, out, student=student)
        extra = {"student": student, "lab": lab, "elapsed_s": f"{run.elapsed_s:.1f}"}
        extra["notebook"] = str(out) if out and out.exists() else ""
        return [dict(r, **extra) for r in report.verdicts(expected, calls, run)]

    keys = [(s, lab) for s in students for lab in lab_names]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return [row for rows in pool.map(one, keys) for row in rows]


def main(argv: list[str] | None = None) -> int:
    """The command line; see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m clusterlab.course.grade")
    parser.add_argument(
        "submissions", type=Path, help="SUBMISSIONS_DIR/<student>/<lab>.ipynb"
    )
    parser.add_argument("--out", type=Path, required=True, help="the gradebook CSV")
    parser.add_argument(
        "--html", type=Path, help="summary page (default: beside --out)"
    )
    parser.add_argument(
        "--labs", type=Path, default=Path("labs"), help="reference labs"
    )
    parser.add_argument("--lab", action="append", help="grade only this lab (repeat)")
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="s per notebook"
    )
    parser.add_argument("--jobs", type=int, default=1, help="notebooks at once")
    parser.add_argument("--notebooks", type=Path, help="keep executed notebooks here")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"SUBMISSIONS_DIR={str(args.submissions)!r} is not a folder")
    procs.become_subreaper()
    labs = args.labs if args.labs.is_dir() else None
    try:
        rows = grade(
            args.submissions, labs, args.lab, args.timeout, args.jobs, args.notebooks
        )
    except ValueError as err:
        parser.error(str(err))
    finally:
        procs.reap_adopted()
    if not rows:
        parser.error(f"no <student>/<lab>.ipynb under {args.submissions}")
    report.write_csv(rows, args.out)
    page = args.html or args.out.with_suffix(".html")
    report.write_html(rows, page)
    counts = Counter(r["status"] for r in rows if r["check"] != report.NOTEBOOK)
    tally = ", ".join(f"{counts[s]} {s}" for s in report.STATUSES if counts[s])
    print(f"{len(rows)} rows ({tally}) in {args.out}; summary in {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
