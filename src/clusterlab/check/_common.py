"""What every self-check shares: the verdict lines and the time limit."""

from __future__ import annotations

import sys

import torch

TICK = "\u2714"


def check_timeout_s() -> float:
    """Seconds a distributed check may run: ``cl.check.CHECK_TIMEOUT_S``."""
    return sys.modules["clusterlab.check"].CHECK_TIMEOUT_S


def not_attempted(name: str) -> bool:
    """Say that the exercise is still a stub; return False."""
    print(
        f"not attempted: {name} still raises NotImplementedError; "
        "write it, then run this cell again"
    )
    return False


def passed(name: str, what: str) -> bool:
    """Print the tick line for a passed check; return True."""
    print(f"{TICK} {name}: {what}")
    return True


def short(t: torch.Tensor) -> str:
    """A tensor as a short list with three decimals, for hints."""
    return "[" + ", ".join(f"{v:.3f}" for v in t.tolist()) + "]"
