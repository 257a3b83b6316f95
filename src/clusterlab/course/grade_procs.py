"""Stopping everything a graded notebook started, and nothing else.

A notebook's runner starts in a session of its own, but the kernel it starts
opens another session, and the ranks a lab forks put themselves in process
groups of their own; killing one process group is therefore not enough. Every
process of a run carries the run's token in its environment, so the grader
finds them all, also those whose parent has died, and it freezes them before
it kills them, so that none forks a new one meanwhile.
"""

from __future__ import annotations

import os
import signal
import sys

import psutil


def _processes(root_pid: int | None, name: str, token: str) -> list:
    """``root_pid``, its descendants, and every process whose ``name`` is ``token``."""
    procs = {}
    if root_pid is not None:
        try:
            root = psutil.Process(root_pid)
            procs.update({p.pid: p for p in [root, *root.children(recursive=True)]})
        except psutil.Error:
            pass
    for p in psutil.process_iter():
        try:
            if p.pid != os.getpid() and p.environ().get(name) == token:
                procs.setdefault(p.pid, p)
        except psutil.Error:
            continue
    return list(procs.values())


def stop_everything(root_pid: int | None, name: str, token: str) -> int:
    """Kill the tree of ``root_pid`` and every process whose environment has the token.

    The processes are frozen first (SIGSTOP), then looked for again, so that none
    can fork a new one or restart a peer while the others die.

    Args:
        root_pid: the runner's process id, or None once it has ended.
        name: the environment variable that holds the token.
        token: this run's value of it.

    Returns:
        How many processes were killed.
    """
    seen: dict[int, object] = {}
    for _ in range(10):
        new = [p for p in _processes(root_pid, name, token) if p.pid not in seen]
        if not new:
            break
        for p in new:
            seen[p.pid] = p
            try:
                p.suspend()
            except psutil.Error:
                pass
    if root_pid is not None:
        try:
            os.killpg(root_pid, signal.SIGKILL)
        except OSError:
            pass
    for p in seen.values():
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(list(seen.values()), timeout=5)
    return len(seen)


def become_subreaper() -> None:
    """On Linux, adopt orphaned descendants, so that none outlives the grader."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        except (OSError, AttributeError):
            pass


def reap_adopted() -> None:
    """Kill and reap every process still below this one (the grader, at its end)."""
    children = psutil.Process().children(recursive=True)
    for p in children:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(children, timeout=5)
