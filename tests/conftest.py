"""Fixtures shared by the book and site tests."""

import pytest

from book_helpers import jupyter_book


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """The whole book, built once per test session as the README builds it."""
    out = tmp_path_factory.mktemp("book")
    result = jupyter_book(".", "-W", "-n", "--keep-going", "--path-output", str(out))
    log = result.stdout[-6000:] + result.stderr[-6000:]
    assert result.returncode == 0, f"the book build failed:\n{log}"
    html = out / "_build" / "html"
    assert (html / "index.html").exists(), log
    return html
