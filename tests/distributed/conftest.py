"""Every distributed test leaves nothing running (``no_leftover_processes``)."""

import psutil
import pytest


def _descendants():
    """Child processes, except multiprocessing's resource tracker (one per parent)."""
    pids = set()
    for proc in psutil.Process().children(recursive=True):
        try:
            if "resource_tracker" not in " ".join(proc.cmdline()):
                pids.add(proc.pid)
        except psutil.Error:
            pass
    return pids


@pytest.fixture(autouse=True)
def no_leftover_processes():
    """Fail any test here that leaves a child process of the test runner alive.

    Every test of this folder starts ranks, agents or servers, so every one is
    held to it (a module fixture's server, started before, is not counted).
    """
    before = _descendants()
    yield
    left = set()
    for _ in range(50):  # reaped children may take a moment to disappear
        left = {
            pid
            for pid in _descendants() - before
            if psutil.pid_exists(pid)
            and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        }
        if not left:
            break
        psutil.wait_procs([psutil.Process(p) for p in left], timeout=0.1)
    assert not left, f"processes left behind: {sorted(left)}"
