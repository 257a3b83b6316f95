"""Paths and the jupyter-book runner shared by the book, contract and site tests."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD_TIMEOUT_S = 15 * 60


# Set by labs/conftest.py once nbval has run the labs (see _ext/executed_labs.py).
EXECUTION_CACHE_ENV = "CLUSTERLAB_EXECUTION_CACHE"


def jupyter_book(*args, cwd=ROOT, timeout=BUILD_TIMEOUT_S, reuse_labs=False):
    """Run this environment's jupyter-book; return the CompletedProcess.

    With ``reuse_labs`` the build takes the outputs of labs that nbval has
    already run in this session (unchanged labs only); every other build, and
    every page nbval did not run, is executed afresh.
    """
    cmd = [str(Path(sys.executable).parent / "jupyter-book"), "build", *args]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if not reuse_labs:
        env.pop(EXECUTION_CACHE_ENV, None)
    return subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def chromium_path() -> str | None:
    """Chromium or Chrome: ``CHROMIUM_PATH``, else the first one on ``PATH``, else
    Chrome's usual place on macOS; None when there is none."""
    explicit = os.environ.get("CHROMIUM_PATH")
    if explicit:
        return explicit
    for name in (
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ):
        found = shutil.which(name)
        if found:
            return found
    mac = Path("/Applications/Google Chrome.app/Contents/MacOS/Google Chrome")
    return str(mac) if mac.exists() else None


def script_module(name: str):
    """``scripts/<name>.py`` loaded as a module, so tests call its functions."""
    import importlib.util

    path = ROOT / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"script_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure_outputs():
    """``scripts/measure_outputs.py`` as a module: it knows what a chart output is."""
    return script_module("measure_outputs")
