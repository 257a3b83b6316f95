"""Fixtures shared by the book and site tests.

The book is built once per test run. In a plain ``pytest`` run the first test
that needs it builds it. Under ``make test``'s pytest-xdist workers the worker
that ran the labs builds it (``built_site``: the labs, the book build and the
chart-size test are one unit of work, ``conftest.py`` at the top), and
publishes it in the run's shared temporary folder; the site tests, split into
parts that other workers may take once nothing else is left, read that
publication (``site_of_the_run``) and never build a second copy.
"""

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from book_helpers import jupyter_book

#: How long a site test waits for the labs' worker to publish the book: the labs
#: and the build, on a slow machine.
PUBLISH_WAIT_S = 45 * 60

#: The test files that build the book when they need it; any other test that
#: reads it (the site tests) waits for their build under xdist.
BUILDING_FILES = ("tests/test_book_build.py", "tests/test_page_chart_sizes.py")


def _build(out: Path) -> Path:
    result = jupyter_book(
        ".", "-W", "-n", "--keep-going", "--path-output", str(out), reuse_labs=True
    )
    log = result.stdout[-6000:] + result.stderr[-6000:]
    assert result.returncode == 0, f"the book build failed:\n{log}"
    html = out / "_build" / "html"
    assert (html / "index.html").exists(), log
    return html


def _run_folder(tmp_path_factory) -> Path | None:
    """The folder every xdist worker of this run shares, or None without xdist."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    return tmp_path_factory.getbasetemp().parent


@contextmanager
def _locked(path: Path):
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _publish(done: Path, text: str) -> None:
    """Write ``done`` whole or not at all: a waiting worker polls for it."""
    part = done.with_suffix(".part")
    part.write_text(text)
    part.replace(done)


def _published(done: Path) -> Path:
    """The built site named by a publication, or the build's failure, raised."""
    status, _, rest = done.read_text().partition("\n")
    if status != "ok":
        pytest.fail(f"the book build of this run failed:\n{rest}", pytrace=False)
    return Path(rest.strip())


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """The whole book, built once per test run as the README builds it.

    The labs that nbval has run earlier in the session (``testpaths`` puts
    ``labs`` first) are not executed again: the build takes their outputs from
    that run (``labs/conftest.py``); the chapters are executed as usual. Under
    xdist the build is published for the other workers' site tests.

    Set CLUSTERLAB_SITE to the ``_build/html`` folder of an existing build to
    test that instead (with CLUSTERLAB_SITE_PAGES naming its pages).
    """
    if os.environ.get("CLUSTERLAB_SITE"):
        return Path(os.environ["CLUSTERLAB_SITE"]).resolve()
    shared = _run_folder(tmp_path_factory)
    if shared is None:
        return _build(tmp_path_factory.mktemp("book"))
    done = shared / "built-book.done"
    with _locked(shared / "built-book.lock"):
        if not done.exists():
            try:
                html = _build(shared / "built-book")
            except AssertionError as err:
                _publish(done, f"failed\n{err}")
                raise
            _publish(done, f"ok\n{html}")
    return _published(done)


def _a_building_test_runs(session) -> bool:
    return any(
        item.nodeid.split("::", 1)[0] in BUILDING_FILES
        and "built_site" in getattr(item, "fixturenames", ())
        for item in session.items
    )


@pytest.fixture(scope="session")
def site_of_the_run(request, tmp_path_factory):
    """The built book for tests that only read it.

    Under xdist, when this run also builds the book with the labs, wait for that
    build's publication (a worker that takes a part of the site tests has run
    no lab: building here would execute every lab again). Otherwise the book
    is built here, once (``built_site``).
    """
    shared = _run_folder(tmp_path_factory)
    if (
        os.environ.get("CLUSTERLAB_SITE")
        or shared is None
        or not _a_building_test_runs(request.session)
    ):
        return request.getfixturevalue("built_site")
    done = shared / "built-book.done"
    deadline = time.monotonic() + PUBLISH_WAIT_S
    while not done.exists():
        if time.monotonic() > deadline:
            pytest.fail(
                f"no book was published in {PUBLISH_WAIT_S / 60:g} min: the worker "
                "that ran the labs did not build it (see its tests above)",
                pytrace=False,
            )
        time.sleep(1.0)
    return _published(done)
