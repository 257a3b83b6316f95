"""How ``make test`` shares the run between pytest-xdist workers.

``make test`` runs one worker per core with ``--dist loadfile``: each test file
goes to one worker whole, so that its module fixtures (a JupyterLab server, a
graded class) start once. Here that mode gets three more rules:

* the labs, the book build and the chart-size test of the built book are one
  unit, run in that order by one worker, because the build takes the labs'
  outputs from that worker's nbval run (``labs/conftest.py``); that unit is
  handed out first, since it is the longest;
* the site tests (a browser on each built page) are split into
  ``SITE_PARTS`` units, handed out last: whichever worker is free then takes a
  part and reads the book the first worker published (``tests/conftest.py``),
  so the browser's work is shared once the labs are done;
* every other file is its own unit, handed out in between.

Without xdist nothing here applies.
"""

from __future__ import annotations

import zlib
from collections import OrderedDict

import pytest

#: The unit of work of the labs and of the tests that build the book.
BOOK_GROUP = "labs and the book built from them"

#: The test files whose tests build the book (``built_site``) with the labs; a
#: contract test fails when a test elsewhere uses it.
BOOK_TEST_FILES = (
    "tests/test_book_build.py",
    "tests/test_page_chart_sizes.py",
)

#: The tests that read the built book in a browser (``site_of_the_run``).
SITE_FILE = "tests/test_site.py"

#: Units the site tests are split into.
SITE_PARTS = 3


def site_part(nodeid: str) -> str:
    """The unit of a site test: one of ``SITE_PARTS``, fixed by its id."""
    k = zlib.crc32(nodeid.encode()) % SITE_PARTS + 1
    return f"site tests, part {k} of {SITE_PARTS}"


def scope_of(nodeid: str) -> str:
    """The unit of work of a test: its file, ``BOOK_GROUP`` or a site part."""
    path = nodeid.split("::", 1)[0]
    if path.endswith(".ipynb") or path in BOOK_TEST_FILES:
        return BOOK_GROUP
    if path == SITE_FILE:
        return site_part(nodeid)
    return path


def hand_out_order(scope: str) -> int:
    """0 for the book's unit (first), 2 for the site parts (last), 1 otherwise."""
    if scope == BOOK_GROUP:
        return 0
    return 2 if scope.startswith("site tests, part ") else 1


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FilesAndTheBook(LoadFileScheduling):
        _ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

        def _assign_work_unit(self, node) -> None:
            # The queue is complete (largest unit first) before the first unit
            # goes out; a stable sort keeps that order within each rank.
            if not self._ordered:
                self._ordered = True
                order = sorted(self.workqueue, key=hand_out_order)
                self.workqueue = OrderedDict((k, self.workqueue[k]) for k in order)
            super()._assign_work_unit(node)

    return FilesAndTheBook(config, log)


def _kernel_ports():
    """The book's ``_ext/kernel_ports.py`` (``make book`` uses it too)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent / "_ext" / "kernel_ports.py"
    spec = importlib.util.spec_from_file_location("kernel_ports", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


try:
    _kernel_ports().use_ports_below_the_ephemeral_range()
except ImportError:  # jupyter_client is in requirements.txt; without it no kernels
    pass
