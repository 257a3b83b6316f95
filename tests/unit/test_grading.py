"""The autograder's parts that need no kernel: the checks' record, the verdicts,
the reports, the process clean-up and the notebook-outputs check."""

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import psutil
import pytest

from clusterlab.course import grade_procs as procs
from clusterlab.course import grade_report as report
from clusterlab.course.grade import lab_of

ROOT = Path(__file__).resolve().parents[2]

CHECKS = textwrap.dedent(
    """
    import clusterlab as cl

    def stub(*args):
        raise NotImplementedError

    def wrong(speedup, gpu_price, cpu_price):
        return True

    def raises(speedup, gpu_price, cpu_price):
        return 1 / 0

    cl.decide.check.cheaper_on_gpu(stub)
    cl.decide.check.cheaper_on_gpu(cl.decide.answer.cheaper_on_gpu)
    for answer in (wrong, raises):
        try:
            cl.decide.check.cheaper_on_gpu(answer)
        except Exception as err:
            print(type(err).__name__, err)
    print(cl.decide.check.cheaper_on_gpu.__name__, type(cl.decide.check).__name__)
    """
)


def _run_checks(tmp_path, record: bool):
    env = dict(os.environ)
    env.pop("CLUSTERLAB_CHECK_RESULTS", None)
    log = tmp_path / "checks.jsonl"
    if record:
        env["CLUSTERLAB_CHECK_RESULTS"] = str(log)
    out = subprocess.run(
        [sys.executable, "-c", CHECKS],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return out.stdout, log


def test_the_record_holds_each_verdict_and_printing_is_unchanged(tmp_path):
    printed, log = _run_checks(tmp_path, record=True)
    plain, _ = _run_checks(tmp_path / "plain", record=False)
    assert printed.replace("_RecordingModule", "module") == plain
    events = [json.loads(line) for line in log.read_text().splitlines()]
    finals = [(e["check"], e["status"]) for e in events if e["status"] != "started"]
    assert finals == [
        ("cheaper_on_gpu", "not attempted"),
        ("cheaper_on_gpu", "pass"),
        ("cheaper_on_gpu", "fail"),
        ("cheaper_on_gpu", "error"),
    ]
    assert "50x faster" in events[5]["detail"]  # the hint, as the check raised it
    assert events[7]["detail"].startswith("ZeroDivisionError")
    assert sum(e["status"] == "started" for e in events) == 4


def test_without_the_variable_nothing_is_recorded(tmp_path):
    printed, log = _run_checks(tmp_path, record=False)
    assert not log.exists()
    assert printed.strip().endswith("cheaper_on_gpu module")


def _run(timeout_s=20.0, **kw):
    sources = [
        "# md",
        "import clusterlab as cl",
        "cl.topic.check.a(f)",
        "cl.topic.check.b(g)",
    ]
    return report.Run(timeout_s, sources=sources, ready=True, **kw)


def _done(status="ok", **kw):
    return {"event": "done", "status": status, **kw}


def _statuses(run, expected=("a", "b"), calls=None):
    calls = {"a": [2], "b": [3]} if calls is None else calls
    return {
        r["check"]: r["status"] for r in report.verdicts(list(expected), calls, run)
    }


def test_verdicts_for_a_run_that_ended():
    run = _run(
        finished=True,
        cells={1: _done(), 2: _done(), 3: _done("error", ename="AssertionError")},
        checks=[
            {"check": "a", "status": "started"},
            {"check": "a", "status": "pass", "detail": "right"},
            {"check": "b", "status": "started"},
            {"check": "b", "status": "fail", "detail": "a hint"},
        ],
    )
    rows = report.verdicts(["a", "b"], {"a": [2], "b": [3]}, run)
    assert [(r["check"], r["status"]) for r in rows] == [
        ("a", "pass"),
        ("b", "fail"),
        (report.NOTEBOOK, "pass"),  # the only error was the check's own
    ]
    assert rows[1]["detail"] == "a hint"


def test_a_cell_that_raises_before_its_check_is_an_error():
    cells = {1: _done(), 2: _done("error", ename="NameError", evalue="x"), 3: _done()}
    run = _run(finished=True, cells=cells)
    got = report.verdicts(["a", "b"], {"a": [2], "b": [3]}, run)
    # The notebook's row says it ran: the error is on the check's own row.
    assert [r["status"] for r in got] == ["error", "not attempted", "pass"]
    assert "NameError: x before the check ran" in got[0]["detail"]


def test_a_cell_that_raises_outside_any_check_makes_the_notebook_an_error():
    cells = {1: _done("error", ename="KeyError", evalue="k"), 2: _done(), 3: _done()}
    checks = [{"check": n, "status": "pass"} for n in "ab"]
    got = report.verdicts(
        ["a", "b"],
        {"a": [2], "b": [3]},
        _run(finished=True, cells=cells, checks=checks),
    )
    assert [r["status"] for r in got] == ["pass", "pass", "error"]
    assert "KeyError: k" in got[2]["detail"]


def test_a_time_limit_marks_the_running_check_and_the_later_ones():
    run = _run(
        timed_out=True,
        cells={1: _done(), 2: {"event": "start"}},
        checks=[{"check": "a", "status": "started"}],
    )
    got = report.verdicts(["a", "b"], {"a": [2], "b": [3]}, run)
    assert [r["status"] for r in got] == ["timeout", "timeout", "timeout"]
    assert "20 s time limit" in got[1]["detail"] and "in cell 3" in got[1]["detail"]


def test_a_kernel_that_dies_is_an_error_and_a_missing_call_is_not_attempted():
    run = _run(died=2, cells={1: _done(), 2: {"event": "start"}})
    assert _statuses(run, calls={"a": [2]}) == {
        "a": "error",
        "b": "not attempted",
        report.NOTEBOOK: "error",
    }


def test_a_notebook_that_could_not_start():
    run = report.Run(20.0, problem="the notebook cannot be read: bad JSON")
    got = report.verdicts(["a"], {}, run)
    assert got[-1] == {
        "check": report.NOTEBOOK,
        "status": "error",
        "detail": "the notebook cannot be read: bad JSON",
    }


def test_a_missing_notebook_is_not_attempted():
    rows = report.missing(["a"])
    assert {r["status"] for r in rows} == {"not attempted"}
    assert [r["check"] for r in rows] == ["a", report.NOTEBOOK]


@pytest.mark.parametrize(
    "name",
    [
        "05_ring_allreduce.ipynb",
        "Copy of 05_ring_allreduce.ipynb",
        "05_ring_allreduce (1).ipynb",
    ],
)
def test_colab_file_names_map_to_their_lab(name):
    assert lab_of(name, ["05_ring_allreduce", "23_economics"]) == "05_ring_allreduce"


def test_reports_escape_what_students_wrote(tmp_path):
    rows = [
        {
            "student": "<b>eve</b>",
            "lab": "05_ring_allreduce",
            "check": "ring_allgather",
            "status": "fail",
            "detail": "<script>alert(1)</script>",
            "elapsed_s": "1.0",
            "notebook": "",
        }
    ]
    report.write_csv(rows, tmp_path / "gb.csv")
    report.write_html(rows, tmp_path / "gb.html")
    page = (tmp_path / "gb.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page
    header = (tmp_path / "gb.csv").read_text().splitlines()[0]
    assert header.split(",")[:5] == ["student", "lab", "check", "status", "detail"]


ESCAPER = textwrap.dedent(
    """
    import os, time
    for _ in range(2):
        if os.fork() == 0:
            os.setsid()  # leaves the group and the session, as a forked rank may
            if os.fork() == 0:
                time.sleep(600)
            time.sleep(600)
    time.sleep(600)
    """
)


def test_stop_everything_kills_a_tree_that_left_its_process_group():
    token = f"test-{os.getpid()}-{time.time()}"
    env = {**os.environ, "CLUSTERLAB_GRADE_RUN": token}
    root = subprocess.Popen(
        [sys.executable, "-c", ESCAPER], env=env, start_new_session=True
    )
    deadline = time.monotonic() + 60
    while len(psutil.Process(root.pid).children(recursive=True)) < 4:
        assert time.monotonic() < deadline, "the test's processes did not start"
        time.sleep(0.1)
    killed = procs.stop_everything(root.pid, "CLUSTERLAB_GRADE_RUN", token)
    root.wait(timeout=10)
    assert killed == 5
    left = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("CLUSTERLAB_GRADE_RUN") == token:
                if p.status() != psutil.STATUS_ZOMBIE:
                    left.append(p.pid)
        except psutil.Error:
            continue
    assert not left


def _lab_with_outputs(tmp_path) -> Path:
    nb = nbformat.read(ROOT / "labs" / "_template.ipynb", as_version=4)
    path = tmp_path / "lab.ipynb"
    nbformat.write(nb, path)
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="hi\n")]
    code.execution_count = 3
    nbformat.write(nb, tmp_path / "dirty.ipynb")
    return path


def test_the_outputs_check_fails_on_outputs_and_fix_strips_them(tmp_path):
    clean = _lab_with_outputs(tmp_path)
    dirty = tmp_path / "dirty.ipynb"
    script = [sys.executable, str(ROOT / "scripts" / "check_notebooks_stripped.py")]

    def check(*args):
        return subprocess.run([*script, *args], capture_output=True, text=True)

    assert check(str(clean)).returncode == 0
    failed = check(str(dirty))
    assert failed.returncode == 1 and "dirty.ipynb" in failed.stdout
    assert check("--fix", str(dirty)).returncode == 0
    assert check(str(dirty)).returncode == 0
    assert dirty.read_bytes() == clean.read_bytes()  # written as nbformat writes


def test_a_check_that_returns_a_table_or_an_empty_list_is_recorded_as_a_pass(
    tmp_path, monkeypatch
):
    import json

    import pandas as pd

    from clusterlab.core import checks as _common

    log = tmp_path / "checks.jsonl"
    monkeypatch.setenv("CLUSTERLAB_CHECK_RESULTS", str(log))
    table = _common.recorded("returns_a_table", lambda: pd.DataFrame({"a": [1, 2]}))
    flips = _common.recorded("returns_no_differences", lambda: [])
    stub = _common.recorded("returns_false", lambda: False)
    assert len(table()) == 2 and flips() == [] and stub() is False
    final = {}
    for line in log.read_text().splitlines():
        event = json.loads(line)
        final[event["check"]] = event["status"]
    assert final == {
        "returns_a_table": "pass",
        "returns_no_differences": "pass",
        "returns_false": "not attempted",
    }
