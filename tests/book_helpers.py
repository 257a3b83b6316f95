"""Paths and the jupyter-book runner shared by the book, contract and site tests."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD_TIMEOUT_S = 15 * 60


def jupyter_book(*args, cwd=ROOT, timeout=BUILD_TIMEOUT_S):
    """Run this environment's jupyter-book; return the CompletedProcess."""
    cmd = [str(Path(sys.executable).parent / "jupyter-book"), "build", *args]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
