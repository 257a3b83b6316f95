"""Children without colour, and readers of their text that strip it anyway.

Python 3.13 colours an uncaught traceback when ``FORCE_COLOR`` is set (a
Jupyter kernel of ipykernel 7 sets it); these lines are coloured as it prints
them, so the case is covered on every Python.
"""

import subprocess
import sys

import pytest

from clusterlab.clocks import rendezvous
from clusterlab.control_plane import store
from clusterlab.core import child, torchrun

NAME = "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"
COLOURED = [
    "Traceback (most recent call last):",
    '  File "\x1b[35m/srv/job.py\x1b[0m", line \x1b[35m3\x1b[0m,'
    " in \x1b[35m<module>\x1b[0m",
    f"\x1b[1;35m{NAME}\x1b[0m: \x1b[35mThe node 'n1' has failed to join\x1b[0m",
]
WANT = "RendezvousTimeoutError: The node 'n1' has failed to join"


def test_strip_ansi_removes_colours_and_keeps_the_text():
    assert child.strip_ansi(COLOURED[2]) == f"{NAME}: The node 'n1' has failed to join"
    assert (
        child.strip_ansi("plain: \x1b[2K\x1b[1Anot a colour") == "plain: not a colour"
    )
    with pytest.raises(ValueError, match="text="):
        child.strip_ansi(b"\x1b[0m")


def test_the_rendezvous_reader_names_a_coloured_exception():
    assert [e.strip() for e in rendezvous.exceptions_in(COLOURED)] == [WANT]


def test_the_store_reader_names_a_coloured_exception():
    lines = [(1.0, f"[rank0]: {line}") for line in COLOURED]
    (found,) = store.exception_lines(lines, after=0.5)
    assert found.startswith("RendezvousTimeoutError") and found.endswith("to join")
    assert store.exception_lines(lines, after=2.0) == []


def test_each_reader_fails_when_the_stripping_is_removed(monkeypatch):
    """A planted regression: with strip_ansi an identity, neither reader sees it."""
    monkeypatch.setattr(child, "strip_ansi", lambda text: text)
    assert rendezvous.exceptions_in(COLOURED) == []
    assert store.exception_lines([(1.0, line) for line in COLOURED]) == []


def test_children_get_no_colour(monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("CLICOLOR_FORCE", "1")
    for env in (child.child_env(), torchrun.torchrun_env(LOGLEVEL="INFO")):
        assert "FORCE_COLOR" not in env and "CLICOLOR_FORCE" not in env
        assert env["PYTHON_COLORS"] == "0" and env["NO_COLOR"] == "1"
    assert child.child_env({"A": "1"}, B="2") == dict(
        A="1", B="2", PYTHON_COLORS="0", NO_COLOR="1"
    )


def test_a_real_child_prints_a_plain_traceback(monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    out = subprocess.run(
        [sys.executable, "-c", "raise ValueError('boom')"],
        env=child.child_env(),
        capture_output=True,
        text=True,
    )
    assert out.stderr.strip().splitlines()[-1] == "ValueError: boom"
    assert "\x1b[" not in out.stderr
