"""Fixtures shared by the book, contract and site tests."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD_TIMEOUT_S = 15 * 60


def jupyter_book(*args, cwd=ROOT, timeout=BUILD_TIMEOUT_S):
    """Run the pinned jupyter-book from this environment; return the CompletedProcess."""
    cmd = [str(Path(sys.executable).parent / "jupyter-book"), "build", *args]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """The whole book, built once per test session exactly as the README builds it."""
    out = tmp_path_factory.mktemp("book")
    result = jupyter_book(".", "-W", "-n", "--keep-going", "--path-output", str(out))
    log = result.stdout[-6000:] + result.stderr[-6000:]
    assert result.returncode == 0, f"the book build failed:\n{log}"
    html = out / "_build" / "html"
    assert (html / "index.html").exists(), log
    return html
