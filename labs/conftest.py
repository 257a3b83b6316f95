"""nbval runs every lab cell by cell; the book build of the same test run reuses it.

Each lab is run in its own kernel with the environment the book build gives its
kernels (``CLUSTERLAB_BOOK_BUILD=1``, set only while the kernel starts, so that
later tests' kernels do not inherit it). When every cell of a lab has passed,
the lab, with the outputs nbval received, is stored in a jupyter-cache folder
of this test session, and ``CLUSTERLAB_EXECUTION_CACHE`` names that folder for
the book build (``_ext/executed_labs.py``). A lab with a failed cell is not
stored, so the build runs it again and reports the failure in its own words.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
import pytest

try:
    from nbval.plugin import IPyNbCell, IPyNbFile
except ImportError:  # nbval is in requirements.txt; without it nothing here runs
    IPyNbCell = IPyNbFile = None

CACHE_ENV = "CLUSTERLAB_EXECUTION_CACHE"
BOOK_BUILD_ENV = "CLUSTERLAB_BOOK_BUILD"

_failed: set[str] = set()
_started: dict[str, float] = {}
_report_seconds: dict[str, float] = {}  # lab -> seconds, from the reports


#: Messages a widget's ``Output`` captures while it is active.
CAPTURED_TYPES = {"display_data", "stream", "clear_output", "update_display_data"}


def _hide_what_output_widgets_capture(get_kernel_message):
    """Wrap nbval's message reader so that it drops what an ``Output`` captures.

    A front end (and nbclient, which the book build uses) sends whatever a
    kernel displays inside ``with out:`` to the ``Output`` widget, not to the
    cell: the kernel announces it by setting the widget's ``msg_id`` to the
    cell's request and clears it afterwards. nbval has no widget manager, so
    without this it would store a widget's redraws as outputs of the cell, and
    the book, built from those outputs, would show charts the reader never sees.
    Errors are never dropped.
    """
    capturing: dict[str, str] = {}  # Output widget's comm id -> request id

    def read(self, timeout=None, stream="iopub"):
        while True:
            msg = get_kernel_message(self, timeout=timeout, stream=stream)
            if stream != "iopub":
                return msg
            kind, content = msg["msg_type"], msg.get("content", {})
            if kind == "comm_msg":
                state = content.get("data", {}).get("state", {})
                if "msg_id" in state:
                    if state["msg_id"]:
                        capturing[content.get("comm_id")] = state["msg_id"]
                    else:
                        capturing.pop(content.get("comm_id"), None)
            elif kind == "comm_close":
                capturing.pop(content.get("comm_id"), None)
            elif kind in CAPTURED_TYPES and (
                msg["parent_header"].get("msg_id") in capturing.values()
            ):
                continue
            return msg

    return read


def _start_again_if_it_died(start_new_kernel):
    """Wrap nbval's kernel start: a kernel that dies before its first reply gets
    one more start.

    Seen in the test command: Lab 02's kernel died before replying to
    ``kernel_info``, and another kernel of the same day with ``ZMQError: Address
    already in use``: a connection had taken a port between jupyter_client's
    choice and the kernel's bind. The root ``conftest.py`` now chooses ports that
    connections never take; this is the second line. A lab whose kernel dies
    twice still fails.
    """

    def start(*args, **kwargs):
        try:
            return start_new_kernel(*args, **kwargs)
        except RuntimeError as exc:
            if "died" not in str(exc):
                raise
            print(f"the lab's kernel died at start ({exc}); starting it again")
            return start_new_kernel(*args, **kwargs)

    return start


if IPyNbFile is not None:
    import nbval.kernel

    IPyNbFile.get_kernel_message = _hide_what_output_widgets_capture(
        IPyNbFile.get_kernel_message
    )
    nbval.kernel.start_new_kernel = _start_again_if_it_died(
        nbval.kernel.start_new_kernel
    )


def _is_lab_cell(item) -> bool:
    return IPyNbCell is not None and isinstance(item, IPyNbCell)


def _cache_dir(config) -> str:
    path = config._tmp_path_factory.getbasetemp() / "executed_labs"
    path.mkdir(exist_ok=True)
    os.environ[CACHE_ENV] = str(path)
    return str(path)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    """Start the lab's kernel (the first cell's setup) as the book build would."""
    if not _is_lab_cell(item):
        yield
        return
    before = os.environ.get(BOOK_BUILD_ENV)
    os.environ[BOOK_BUILD_ENV] = "1"
    _started.setdefault(item.parent.nodeid, time.perf_counter())
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(BOOK_BUILD_ENV, None)
        else:
            os.environ[BOOK_BUILD_ENV] = before


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if _is_lab_cell(item) and (report.failed or report.skipped):
        _failed.add(item.parent.nodeid)


def pytest_runtest_teardown(item, nextitem):
    """After a lab's last cell, store the executed lab if every cell passed."""
    if not _is_lab_cell(item):
        return
    item.cell.outputs = list(item.test_outputs or [])
    item.cell.execution_count = item.cell_num + 1
    if nextitem is not None and nextitem.parent is item.parent:
        return
    lab = item.parent
    if lab.nodeid in _failed or lab.config.getoption("--co", default=False):
        return
    if any(
        c.cell_type == "code" and c.get("execution_count") is None for c in lab.nb.cells
    ):
        return  # a cell did not run (a deselected or skipped cell): not stored
    seconds = time.perf_counter() - _started.get(lab.nodeid, time.perf_counter())
    nb = nbformat.from_dict(lab.nb)
    _executed_labs().store(_cache_dir(lab.config), nb, str(lab.path), seconds)


def _executed_labs():
    """The book's ``_ext/executed_labs.py``, which owns the cache's layout."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "_ext" / "executed_labs.py"
    spec = importlib.util.spec_from_file_location("executed_labs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pytest_runtest_logreport(report):
    """Add up each lab's setup, call and teardown times, cell by cell.

    Reports reach this hook in the process that prints the summary, also when
    pytest-xdist runs the labs in a worker (``make test``).
    """
    path, _, rest = report.nodeid.partition("::")
    if path.startswith("labs/") and path.endswith(".ipynb") and rest:
        stem = path.removeprefix("labs/").removesuffix(".ipynb")
        _report_seconds[stem] = _report_seconds.get(stem, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    """Each lab's run time, all cells together (the budget is 60 s a lab)."""
    if not _report_seconds:
        return
    terminalreporter.section("lab run times (all cells, s)")
    for name, seconds in sorted(_report_seconds.items()):
        terminalreporter.write_line(f"{name:<28} {seconds:6.1f}")
