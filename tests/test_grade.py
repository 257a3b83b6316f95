"""The autograder on real notebooks: right statuses, time limits kept, nothing left.

The fixtures (``tests/fixtures/grade``, made by its ``build_fixtures.py``) are a
tiny lab with three real checks and five submissions of it: solved, partly
solved, raising, looping forever, and two ranks deadlocked. Real labs are
graded too: a lab's instructor edition must pass every check, and its student
edition must come back "not attempted".

Each test runs ``python -m clusterlab.course.grade`` as an instructor would, with a
marker in its environment; afterwards no process may carry that marker.
"""

import csv
import os
import shutil
import subprocess
import sys
import time
import uuid

import nbformat
import psutil
import pytest

from book_helpers import ROOT
from clusterlab.course import editions as course

pytestmark = pytest.mark.grade

FIXTURES = ROOT / "tests" / "fixtures" / "grade"
LAB = "01_grading_fixture"
REAL_LABS = ["24_decide"]  # a short one: its instructor edition must pass
PUPIL_LAB = "24_decide"  # its student edition, handed in untouched


def _grade(submissions, labs, out, timeout_s, jobs=2):
    """Run the grader's command line; return its rows, wall time and leftovers."""
    marker = uuid.uuid4().hex
    env = {**os.environ, "GRADE_TEST_MARKER": marker}
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "clusterlab.course.grade", submissions, "--labs", labs]
        + ["--out", out / "gradebook.csv", "--timeout", str(timeout_s)]
        + ["--jobs", str(jobs), "--notebooks", out / "executed"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3 * timeout_s + 300,
    )
    wall_s = time.monotonic() - start
    assert result.returncode == 0, result.stdout + result.stderr
    with open(out / "gradebook.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return rows, wall_s, _left_behind(marker)


def _left_behind(marker) -> list[str]:
    left = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("GRADE_TEST_MARKER") == marker:
                if p.status() != psutil.STATUS_ZOMBIE:
                    left.append(" ".join(p.cmdline())[:80])
        except psutil.Error:
            continue
    return left


def _status(rows, student, lab=LAB):
    return {
        r["check"]: r["status"]
        for r in rows
        if (r["student"], r["lab"]) == (student, lab)
    }


def _detail(rows, student, check, lab=LAB):
    (row,) = [
        r for r in rows if (r["student"], r["lab"], r["check"]) == (student, lab, check)
    ]
    return row["detail"]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Solved, partial and raising submissions, real labs, and an absent student."""
    tmp = tmp_path_factory.mktemp("grade")
    subs, labs = tmp / "submissions", tmp / "labs"
    labs.mkdir()
    shutil.copy(FIXTURES / "labs" / f"{LAB}.ipynb", labs)
    for student in ("solved", "partial", "raises"):
        shutil.copytree(FIXTURES / "submissions" / student, subs / student)
    (subs / "absent").mkdir()
    (subs / "teacher").mkdir()
    (subs / "pupil").mkdir()
    for lab in REAL_LABS:
        nb = nbformat.read(ROOT / "labs" / f"{lab}.ipynb", as_version=4)
        nbformat.write(course.student_edition(nb), labs / f"{lab}.ipynb")
        if lab == PUPIL_LAB:
            copy = subs / "pupil" / f"Copy of {lab}.ipynb"  # as Colab names it
            nbformat.write(course.student_edition(nb), copy)
        nbformat.write(course.instructor_edition(nb), subs / "teacher" / f"{lab}.ipynb")
    rows, wall_s, left = _grade(subs, labs, tmp, timeout_s=600)
    return {"rows": rows, "wall_s": wall_s, "left": left, "out": tmp}


def test_a_solved_submission_passes_every_check(graded):
    assert _status(graded["rows"], "solved") == {
        "cheaper_on_gpu": "pass",
        "zero_bytes_per_param": "pass",
        "ring_allgather": "pass",
        "(notebook)": "pass",
    }


def test_a_partial_submission_gets_a_pass_a_fail_with_its_hint_and_a_stub(graded):
    rows = graded["rows"]
    assert _status(rows, "partial") == {
        "cheaper_on_gpu": "pass",
        "zero_bytes_per_param": "fail",
        "ring_allgather": "not attempted",
        "(notebook)": "pass",
    }
    assert "16 whatever the stage" in _detail(rows, "partial", "zero_bytes_per_param")


def test_a_raising_submission_is_an_error_and_later_checks_still_run(graded):
    rows = graded["rows"]
    assert _status(rows, "raises") == {
        "cheaper_on_gpu": "error",
        "zero_bytes_per_param": "error",
        "ring_allgather": "pass",
        "(notebook)": "pass",
    }
    assert _detail(rows, "raises", "cheaper_on_gpu").startswith("ZeroDivisionError")
    assert "ModuleNotFoundError" in _detail(rows, "raises", "zero_bytes_per_param")


def _exercises(lab) -> list[str]:
    nb = nbformat.read(ROOT / "labs" / f"{lab}.ipynb", as_version=4)
    return [
        n
        for c in nb.cells
        if c.cell_type == "code"
        for n in course.stub_names(c.source)
    ]


def test_real_labs_instructor_edition_passes_and_student_edition_is_not_attempted(
    graded,
):
    rows = graded["rows"]
    for lab in REAL_LABS:
        teacher = _status(rows, "teacher", lab)
        assert teacher and set(teacher.values()) == {"pass"}, (lab, teacher)
    pupil = _status(rows, "pupil", PUPIL_LAB)  # handed in as "Copy of <lab>.ipynb"
    assert _exercises(PUPIL_LAB), PUPIL_LAB
    for name in _exercises(PUPIL_LAB):
        assert pupil[name] == "not attempted", pupil


def test_a_student_with_nothing_submitted_is_listed(graded):
    absent = _status(graded["rows"], "absent")
    assert set(absent.values()) == {"not attempted"}
    assert "ring_allgather" in absent and "cheaper_on_gpu" in absent


def test_the_gradebook_has_its_columns_and_a_summary_page(graded):
    header = (graded["out"] / "gradebook.csv").read_text().splitlines()[0]
    assert header.split(",")[:5] == ["student", "lab", "check", "status", "detail"]
    page = (graded["out"] / "gradebook.html").read_text()
    assert "partial" in page and "16 whatever the stage" in page
    executed = graded["out"] / "executed" / "solved" / f"{LAB}.ipynb"
    assert executed.exists()
    assert not graded["left"], graded["left"]


def test_a_loop_and_a_deadlock_are_stopped_at_the_limit_leaving_nothing(
    graded, tmp_path
):
    # A limit the solved notebook needed less than half of on this machine, so
    # the first check is reached before the loop, and the test stays short.
    solved_s = max(
        float(r["elapsed_s"])
        for r in graded["rows"]
        if (r["student"], r["lab"]) == ("solved", LAB)
    )
    limit_s = max(20.0, round(2 * solved_s))
    subs = tmp_path / "submissions"
    for student in ("loops", "deadlock"):
        shutil.copytree(FIXTURES / "submissions" / student, subs / student)
    rows, wall_s, left = _grade(subs, FIXTURES / "labs", tmp_path, timeout_s=limit_s)
    for student in ("loops", "deadlock"):
        assert _status(rows, student) == {
            "cheaper_on_gpu": "pass",
            "zero_bytes_per_param": "timeout",
            "ring_allgather": "timeout",
            "(notebook)": "timeout",
        }, student
        elapsed = [float(r["elapsed_s"]) for r in rows if r["student"] == student]
        assert max(elapsed) <= limit_s + 10, (student, elapsed, limit_s)
        assert f"{limit_s:g} s time limit" in _detail(rows, student, "ring_allgather")
    assert not left, left
    # Both ran at once (--jobs 2): the run took about one limit, not two.
    assert wall_s < 2 * limit_s + 60, (wall_s, limit_s)
