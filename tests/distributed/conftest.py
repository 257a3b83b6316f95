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


@pytest.fixture
def no_leftover_processes():
    """Fail the test if it leaves any child process of the test runner alive."""
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
