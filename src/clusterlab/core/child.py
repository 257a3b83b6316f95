"""What the book's child processes see, and how their output is read back.

A kernel of ipykernel 7 sets ``FORCE_COLOR=1`` and ``CLICOLOR_FORCE=1``, and
Python 3.13 then colours every uncaught traceback a child prints: the last line
of a rendezvous timeout reads
``\\x1b[1;35mtorch...RendezvousTimeoutError\\x1b[0m: \\x1b[35m...\\x1b[0m``. So every
process the book starts (forked ranks, ``torchrun`` agents, the store's and
etcd's helpers, Raft replicas) gets :func:`child_env`, without colour, and every
reader of a child's text passes it through :func:`strip_ansi` first, for a
child that coloured its output all the same (a reader's own terminal, say).
"""

from __future__ import annotations

import os
import re

#: Variables that switch colour off (Python 3.13's own, and the common one).
COLOUR_OFF = {"PYTHON_COLORS": "0", "NO_COLOR": "1"}
#: Variables that force colour on, whatever their value: dropped.
COLOUR_FORCING = ("FORCE_COLOR", "CLICOLOR_FORCE")
#: An ANSI control sequence (CSI): ESC [, parameters, intermediates, a final byte.
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


def child_env(base: dict | None = None, **extra: str) -> dict:
    """A copy of ``base`` (this process's environment) for a child, without colour.

    Args:
        base: the environment to start from (None: ``os.environ``).
        **extra: further variables, set last.
    """
    env = dict(os.environ if base is None else base)
    for name in COLOUR_FORCING:
        env.pop(name, None)
    env.update(COLOUR_OFF)
    env.update(extra)
    return env


def quiet_colour_here() -> None:
    """Switch colour off in this process's own environment (a forked rank's)."""
    for name in COLOUR_FORCING:
        os.environ.pop(name, None)
    os.environ.update(COLOUR_OFF)


def strip_ansi(text: str) -> str:
    """``text`` without ANSI control sequences (colours, bold, cursor moves)."""
    if not isinstance(text, str):
        raise ValueError(f"text={text!r} must be a str")
    return ANSI.sub("", text)
