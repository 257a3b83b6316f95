"""The subpackage named dist stays visible to git, ruff and pytest.

``dist/`` is where Python builds put wheels, and tools treat folders of that
name as output: the common ``.gitignore`` line ``dist/`` hides every folder so
named, ruff skips them by default, and pytest does not collect them. The book
keeps ``clusterlab.dist`` (its public API, its labs and Colab readers use it), so
these tests make sure the guards hold: ``.gitignore`` ignores only the top-level
``/dist/``, and ``pyproject.toml``'s settings make ruff and pytest look inside.
"""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KEPT = ["src/clusterlab/dist/new_module.py", "tests/dist/test_new.py"]
IGNORED = ["dist/clusterlab-0.1.0.whl"]


def _git(*args):
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30
    )


@pytest.fixture(scope="module")
def git_checkout():
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    inside = _git("rev-parse", "--is-inside-work-tree")
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        pytest.skip("not inside a git checkout: nothing to guard")


def _ignored(path: str) -> bool:
    # --no-index: judge the path by the ignore rules alone, tracked or not.
    result = _git("check-ignore", "--no-index", "-q", path)
    assert result.returncode in (0, 1), result.stderr
    return result.returncode == 0


@pytest.mark.parametrize("path", KEPT)
def test_a_new_file_in_the_dist_subpackages_is_not_ignored(git_checkout, path):
    assert not _ignored(path), f"git would ignore {path}: anchor the rule as /dist/"


@pytest.mark.parametrize("path", IGNORED)
def test_the_build_output_folder_is_still_ignored(git_checkout, path):
    assert _ignored(path), f"git would track {path}: .gitignore needs /dist/"


def test_the_check_would_catch_an_unanchored_rule(git_checkout, tmp_path):
    """With a plain ``dist/`` line, the same check reports the subpackage."""
    rules = tmp_path / "exclude"
    rules.write_text("dist/\n", encoding="utf-8")
    result = _git(
        "-c",
        f"core.excludesFile={rules}",
        "check-ignore",
        "--no-index",
        "-q",
        "--",
        KEPT[0],
    )
    # A repository's own .gitignore does not re-include it, so the global rule bites.
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_lints_the_dist_subpackage():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--show-files", "src/clusterlab"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "src/clusterlab/dist/launcher.py" in result.stdout.replace("\\", "/")


def test_pytest_recurses_into_the_dist_folders(request):
    """pytest skips a folder whose name matches ``norecursedirs`` (default: dist)."""
    patterns = request.config.getini("norecursedirs")
    assert patterns, "norecursedirs is unset, so pytest's default skips dist/"
    hits = [p for p in patterns if fnmatch.fnmatch("dist", p)]
    assert not hits, f"norecursedirs {hits} would skip tests/dist"
    assert (ROOT / "tests" / "dist" / "test_ring.py").exists()
