"""Fixtures shared by the book and site tests."""

import os
from pathlib import Path

import pytest

from book_helpers import jupyter_book


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """The whole book, built once per test session as the README builds it.

    The labs that nbval has run earlier in the session (``testpaths`` puts
    ``labs`` first) are not executed again: the build takes their outputs from
    that run (``labs/conftest.py``); the chapters are executed as usual.

    Set CLUSTERLAB_SITE to the ``_build/html`` folder of an existing build to
    test that instead (with CLUSTERLAB_SITE_PAGES naming its pages).
    """
    if os.environ.get("CLUSTERLAB_SITE"):
        return Path(os.environ["CLUSTERLAB_SITE"]).resolve()
    out = tmp_path_factory.mktemp("book")
    result = jupyter_book(
        ".", "-W", "-n", "--keep-going", "--path-output", str(out), reuse_labs=True
    )
    log = result.stdout[-6000:] + result.stderr[-6000:]
    assert result.returncode == 0, f"the book build failed:\n{log}"
    html = out / "_build" / "html"
    assert (html / "index.html").exists(), log
    return html
