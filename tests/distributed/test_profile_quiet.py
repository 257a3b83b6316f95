"""The profiled step prints none of Kineto's ``USDT:``/``STAGE:`` lines to stderr.

Each case runs in a fresh Python process, since Kineto reads its log level once
per process; the unquiet run is the control that shows the lines exist, so the
test can fail.
"""

import subprocess
import sys
import textwrap

import pytest

from book_helpers import ROOT

pytestmark = pytest.mark.dist

_PROFILE = """
import os, sys
sys.path.insert(0, {src!r})
import torch
from torch.profiler import ProfilerActivity, profile
from clusterlab.debugging.profile import quiet_kineto

def once():
    with profile(activities=[ProfilerActivity.CPU]):
        torch.zeros(1).add_(1)

mode = sys.argv[1]
if mode == "late":
    once()  # Kineto starts loud; the capture must still hide the next one
    sys.stderr.write("--- first profile above ---\\n")
    sys.stderr.flush()
if mode == "plain":
    once()
else:
    with quiet_kineto():
        once()
        sys.stderr.write("a real warning\\n")
"""


def _stderr(mode: str) -> str:
    code = textwrap.dedent(_PROFILE.format(src=str(ROOT / "src")))
    env = {k: v for k, v in __import__("os").environ.items() if "KINETO" not in k}
    out = subprocess.run(
        [sys.executable, "-c", code, mode],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=True,
    )
    return out.stderr


def test_a_plain_profile_prints_kineto_lines_the_control():
    assert "profiler_start" in _stderr("plain")


def test_quiet_kineto_hides_them_and_keeps_other_stderr():
    err = _stderr("quiet")
    assert "USDT" not in err and "profiler_st" not in err, err
    assert "a real warning" in err


def test_quiet_kineto_hides_them_after_a_loud_first_profile():
    err = _stderr("late").split("--- first profile above ---")
    assert "profiler_start" in err[0]  # the level was fixed, loud, before
    assert "USDT" not in err[1] and "a real warning" in err[1], err[1]


def test_the_labs_profiled_step_writes_nothing_to_stderr():
    """What the lab's cell runs: a warm-up in this process, then forked ranks."""
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT / 'src')!r})\n"
        "from clusterlab.debugging.profile import profile_ddp_step\n"
        "ev = profile_ddp_step(2, width=32, layers=2)\n"
        "assert (ev['lane'] == 'communication').any()\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if "KINETO" not in k}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
        env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "USDT" not in out.stderr and "profiler_st" not in out.stderr, out.stderr


def test_in_a_kernel_the_profiled_step_shows_no_stderr_box():
    """As the lab runs it: a Jupyter kernel profiles twice, with ranks forked."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import clusterlab as cl\n"
            "P = cl.debugging.profile\n"
            "small = P.profile_ddp_step(2, width=32, layers=2, bucket_mb=0.25)\n"
            "big = P.profile_ddp_step(2, width=32, layers=2, bucket_mb=100.0)\n"
            "print(len(small), len(big))"
        )
    ]
    NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    outputs = nb.cells[0].outputs
    stderr = [o["text"] for o in outputs if o.get("name") == "stderr"]
    assert not stderr, stderr
    assert any(o.get("name") == "stdout" for o in outputs)
