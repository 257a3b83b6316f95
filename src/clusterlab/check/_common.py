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


def launch_answer(name: str, worker, world_size: int, hint: str, **kwargs):
    """Run a check's ``worker`` on ``world_size`` gloo ranks with the reader's answer.

    Args:
        name: the exercise's name, for messages.
        worker: the check's rank function, ``worker(rank, world_size, **kwargs)``.
        world_size: ranks to start.
        hint: what to look for when the answer fails or hangs.
        **kwargs: passed to the worker (the reader's answer among them).

    Returns:
        The per-rank results, or None while the answer is still a stub (every
        failing rank raised ``NotImplementedError``).

    Raises:
        AssertionError: naming the first failed rank, with ``hint``.
    """
    from ..dist.launcher import LaunchError, launch

    try:
        return launch(
            worker, world_size, backend="gloo", timeout=check_timeout_s(), **kwargs
        )
    except LaunchError as err:
        errors = [r for r in err.reports if r.status == "error"]
        if errors and all(r.error.startswith("NotImplementedError") for r in errors):
            return None
        first = err.reports[err.failed_ranks[0]].summary()
        raise AssertionError(
            f"{name} failed on {world_size} ranks: {first}. {hint}"
        ) from None
