"""ruff keeps the code in one style (STYLE.md): lint and format, line length 88."""

import subprocess
import sys

from book_helpers import ROOT

PATHS = ["src", "tests", "scripts", "_ext", "labs", "conftest.py"]


def _ruff(*args):
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, *PATHS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_ruff_finds_no_lint():
    result = _ruff("check", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr


def test_code_is_formatted():
    result = _ruff("format", "--check", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr
