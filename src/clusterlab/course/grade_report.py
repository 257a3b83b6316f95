"""The autograder's verdicts and reports: one row per student, lab and check.

A run of one notebook leaves two logs: the cells' events (from the runner,
``grade_kernel``) and the checks' events (from the checks' record, see
``clusterlab.core.checks``). ``verdicts`` turns them into rows; ``write_csv``
and ``write_html`` write the gradebook and its summary.
"""

from __future__ import annotations

import csv
import html
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

PASS, FAIL, NOT_ATTEMPTED, ERROR, TIMEOUT = (
    "pass",
    "fail",
    "not attempted",
    "error",
    "timeout",
)


#: Every status a row can have, best first.
STATUSES = (PASS, FAIL, NOT_ATTEMPTED, ERROR, TIMEOUT)


#: The check column of the row about the notebook as a whole.
NOTEBOOK = "(notebook)"


COLUMNS = ["student", "lab", "check", "status", "detail", "elapsed_s", "notebook"]


@dataclass
class Run:
    """What happened to one notebook: its logs, read back, and how it ended."""

    timeout_s: float
    elapsed_s: float = 0.0
    timed_out: bool = False
    cells: dict[int, dict] = field(default_factory=dict)  # index -> its events
    checks: list[dict] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # every cell's source
    died: int | None = None  # the cell in which the kernel died
    ready: bool = False  # the kernel started
    finished: bool = False  # every cell ran
    problem: str = ""  # why it could not run at all

    @classmethod
    def from_logs(cls, timeout_s, cells_log: Path, checks_log: Path, **kw) -> Run:
        """Read the JSON-lines logs of the runner and of the checks (missing: empty)."""
        run = cls(timeout_s, **kw)
        for event in _read_jsonl(cells_log):
            kind, index = event.get("event"), event.get("cell")
            if kind == "kernel" and event.get("status") == "ready":
                run.ready = True
            elif kind in ("start", "done"):
                run.cells.setdefault(index, {}).update(event, event=kind)
            elif kind == "died":
                run.died = index
            elif kind == "finished":
                run.finished = True
        run.checks = _read_jsonl(checks_log)
        return run

    def running(self) -> int | None:
        """The cell that had started and not finished when the run ended."""
        left = [i for i, e in self.cells.items() if e["event"] == "start"]
        return max(left) if left else None

    def where(self, index: int | None) -> str:
        """``cell 21 ("def ring_allgather(...")``, for details."""
        if index is None or index >= len(self.sources):
            return "while the kernel started"
        first = next((ln for ln in self.sources[index].splitlines() if ln.strip()), "")
        first = first if len(first) <= 50 else first[:47] + "..."
        return f'in cell {index + 1} ("{first.strip()}")'

    def stopped(self) -> str:
        """Why cells after the last one that ran did not run."""
        if self.timed_out:
            return (
                f"not run: the notebook reached its {self.timeout_s:g} s time limit "
                f"{self.where(self.running())}"
            )
        if self.died is not None:
            return f"not run: the kernel died {self.where(self.died)}"
        return f"not run: {self.problem or 'the notebook stopped early'}"


def _read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    events = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut short by the kill
    return events


def _check_verdict(name: str, calls: list[int], run: Run) -> tuple[str, str]:
    events = [e for e in run.checks if e.get("check") == name]
    if events and events[-1].get("status") == "started":
        if run.timed_out:
            return (
                TIMEOUT,
                f"stopped by the {run.timeout_s:g} s time limit in the check",
            )
        return ERROR, "the check never finished: the kernel died while it ran"
    final = [e for e in events if e.get("status") in STATUSES]
    if final:
        return final[-1]["status"], final[-1].get("detail", "")
    if not calls:
        return NOT_ATTEMPTED, f"the notebook does not call the check {name}"
    for index in calls:
        state = run.cells.get(index)
        if state is None or state["event"] == "start":
            return (TIMEOUT if run.timed_out else ERROR), run.stopped()
        if state.get("status") == "error":
            return ERROR, (
                f"the code {run.where(index)} raised {state.get('ename')}: "
                f"{state.get('evalue')} before the check ran"
            )
    return NOT_ATTEMPTED, "the check's call was reached but did not run"


def _notebook_verdict(run: Run, accounted: set[int]) -> tuple[str, str]:
    if run.problem and not run.ready:
        return ERROR, run.problem
    if run.timed_out:
        return TIMEOUT, run.stopped()
    if run.died is not None or not run.finished:
        return ERROR, run.stopped()
    errors = [i for i, e in sorted(run.cells.items()) if e.get("status") == "error"]
    code = sum(1 for i in run.cells)
    other = [i for i in errors if i not in accounted]
    if other:
        e = run.cells[other[0]]
        return ERROR, (
            f"the code {run.where(other[0])} raised {e.get('ename')}: {e.get('evalue')}"
            + (f" ({len(other)} cells raised)" if len(other) > 1 else "")
        )
    return PASS, f"ran all {code} code cells in {run.elapsed_s:.1f} s"


def verdicts(expected: list[str], calls: dict[str, list[int]], run: Run) -> list[dict]:
    """Rows ``{check, status, detail}``: one per expected check, then the notebook's.

    Args:
        expected: the lab's checks, in order.
        calls: for each check, the indices of the cells that call it.
        run: what happened when the notebook ran.
    """
    rows, accounted = [], set()
    for name in expected:
        status, detail = _check_verdict(name, calls.get(name, []), run)
        if status in (FAIL, ERROR):
            accounted.update(calls.get(name, []))
        rows.append({"check": name, "status": status, "detail": detail})
    status, detail = _notebook_verdict(run, accounted)
    rows.append({"check": NOTEBOOK, "status": status, "detail": detail})
    return rows


def missing(expected: list[str]) -> list[dict]:
    """Rows for a lab that a student did not submit."""
    return [
        {"check": name, "status": NOT_ATTEMPTED, "detail": "no notebook submitted"}
        for name in [*expected, NOTEBOOK]
    ]


def write_csv(rows: list[dict], path: Path) -> None:
    """The gradebook: ``COLUMNS``, one row per student, lab and check."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


_COLOURS = {
    PASS: "#1a7f37",
    FAIL: "#b35900",
    NOT_ATTEMPTED: "#57606a",
    ERROR: "#cf222e",
    TIMEOUT: "#8250df",
}


def write_html(rows: list[dict], path: Path) -> None:
    """A self-contained summary page: checks passed per student and lab, every row."""
    e = html.escape
    labs = sorted({r["lab"] for r in rows})
    students = sorted({r["student"] for r in rows})
    scored = [r for r in rows if r["check"] != NOTEBOOK]
    head = "".join(f"<th>{e(lab)}</th>" for lab in labs)
    body = []
    for student in students:
        cells = []
        for lab in labs:
            mine = [r for r in scored if r["student"] == student and r["lab"] == lab]
            passed = sum(r["status"] == PASS for r in mine)
            cells.append(f"<td>{passed} / {len(mine)}</td>" if mine else "<td></td>")
        body.append(f"<tr><th>{e(student)}</th>{''.join(cells)}</tr>")
    counts = Counter(r["status"] for r in scored)
    tally = ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])
    detail = "".join(
        "<tr>"
        + "".join(f"<td>{e(str(r[c]))}</td>" for c in ("student", "lab", "check"))
        + f'<td style="color:{_COLOURS.get(r["status"], "black")}">'
        f"<b>{e(r['status'])}</b></td><td>{e(str(r['detail']))}</td></tr>"
        for r in rows
    )
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Gradebook</title>
<style>
body{{font-family:sans-serif;margin:2em}}
table{{border-collapse:collapse;margin-bottom:2em}}
td,th{{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}}
</style>
</head><body>
<h1>Gradebook</h1>
<p>{len(students)} students, {len(labs)} labs, {len(scored)} checks: {e(tally)}.</p>
<h2>Checks passed</h2>
<table><tr><th>student</th>{head}</tr>{"".join(body)}</table>
<h2>Every check</h2>
<table><tr><th>student</th><th>lab</th><th>check</th><th>status</th><th>detail</th></tr>
{detail}</table>
</body></html>
"""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
