"""How ``make test`` shares the run between pytest-xdist workers.

``make test`` runs one worker per core with ``--dist loadfile``: each test file
goes to one worker whole, so that its module fixtures (a JupyterLab server, a
graded class) start once. Here that mode gets one more rule: the labs, the book
build and every test of the built site are one unit, run in that order by one
worker, because the build takes the labs' outputs from that worker's nbval run
(``labs/conftest.py``). Without xdist nothing here applies.
"""

from __future__ import annotations

import pytest

#: The unit of work of the labs and of every test that uses the built book.
BOOK_GROUP = "labs and the book built from them"

#: The test files whose tests use the built book (``built_site``); a contract
#: test fails when a test elsewhere uses it.
BOOK_TEST_FILES = (
    "tests/test_book_build.py",
    "tests/test_page_chart_sizes.py",
    "tests/test_site.py",
)


def scope_of(nodeid: str) -> str:
    """The unit of work of a test: its file, or ``BOOK_GROUP``."""
    path = nodeid.split("::", 1)[0]
    if path.endswith(".ipynb") or path in BOOK_TEST_FILES:
        return BOOK_GROUP
    return path


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FilesAndTheBook(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return FilesAndTheBook(config, log)
