"""What every self-check shares: the verdict lines, the time limit, and the record.

The record is for the course's autograder (``python -m clusterlab.course.grade``): when
the environment variable ``CLUSTERLAB_CHECK_RESULTS`` names a file, every
exercise check of a topic (``cl.<topic>.check.<name>``) also appends one JSON line per
event to it: ``started``, then ``pass``, ``not attempted``, ``fail`` (with the
hint) or ``error`` (with the exception). What a check prints is the same with or
without the record.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import json
import os
import sys
import time
import types
from typing import TYPE_CHECKING

CHECK_TIMEOUT_S = 10.0


if TYPE_CHECKING:  # torch loads when a check runs, not with the package
    import torch


TICK = "\u2714"


#: The environment variable naming the file the checks' results are appended to.
RESULTS_ENV = "CLUSTERLAB_CHECK_RESULTS"


#: The longest detail (hint or error) kept in a record, in characters.
DETAIL_CHARS = 2000


# The checks running now, innermost last, so a verdict goes to the right one.
_running: list[dict] = []


def record(name: str, status: str, detail: str = "") -> None:
    """Append one check event to the file that ``CLUSTERLAB_CHECK_RESULTS`` names.

    Does nothing when the variable is unset.

    Args:
        name: the check's name, as in ``cl.<topic>.check.<name>``.
        status: ``started``, ``pass``, ``not attempted``, ``fail`` or ``error``.
        detail: what was checked, the hint, or the exception.
    """
    path = os.environ.get(RESULTS_ENV)
    if not path:
        return
    line = json.dumps(
        {
            "check": name,
            "status": status,
            "detail": detail[:DETAIL_CHARS],
            "time_s": time.time(),
        }
    )
    try:
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")
    except OSError:
        pass  # a record that cannot be written must not break the lab


def _verdict(name: str, status: str, detail: str) -> None:
    if _running:
        _running[-1].update(status=status, detail=detail)
    else:  # a check called by its module path, without the recording wrapper
        record(name, status, detail)


def recorded(name: str, check):
    """Wrap an exercise check so that each call is recorded; behaviour unchanged.

    Args:
        name: the check's public name.
        check: the check function.

    Returns:
        A function with the same signature, result, output and exceptions.
    """

    @functools.wraps(check)
    def wrapper(*args, **kwargs):
        frame = {"status": None, "detail": ""}
        _running.append(frame)
        record(name, "started")
        try:
            result = check(*args, **kwargs)
        except AssertionError as err:
            record(name, "fail", str(err))
            raise
        except BaseException as err:
            record(name, "error", f"{type(err).__name__}: {err}")
            raise
        finally:
            _running.pop()
        # A check that returned without raising passed, whatever it returns (a
        # table, an empty list of differences); only an explicit False is a stub.
        status = frame["status"] or ("not attempted" if result is False else "pass")
        record(name, status, frame["detail"])
        return result

    wrapper.__clusterlab_recorded__ = True
    return wrapper


def _is_check_module(fullname: str) -> bool:
    """``clusterlab.<topic>.check`` or ``clusterlab.<topic>.check_<what>``."""
    parts = fullname.split(".")
    return (
        len(parts) == 3
        and parts[0] == "clusterlab"
        and parts[1] not in ("core", "models", "course")
        and (parts[2] == "check" or parts[2].startswith("check_"))
    )


class _RecordingModule(types.ModuleType):
    """A topic's check module whose exercise checks come back ``recorded``."""

    def __getattribute__(self, name: str):
        value = super().__getattribute__(name)
        if (
            isinstance(value, types.FunctionType)
            and not name.startswith("_")
            and value.__module__ == super().__getattribute__("__name__")
            and not getattr(value, "__clusterlab_recorded__", False)
        ):
            value = recorded(name, value)
            vars(self)[name] = value  # later lookups get the same wrapper
        return value


class _RecordChecks(importlib.abc.MetaPathFinder):
    """Loads each topic's check modules as ``_RecordingModule`` (only when asked to)."""

    def find_spec(self, fullname, path, target=None):
        if not _is_check_module(fullname):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_record(module):
            exec_module(module)
            module.__class__ = _RecordingModule

        spec.loader.exec_module = exec_and_record
        return spec


def _install_recorder() -> None:
    """Record every exercise check of ``cl.<topic>.check`` when ``RESULTS_ENV`` is set.

    ``import clusterlab`` imports this module first when the variable is set, so
    the hook is in place before any topic's check module loads.
    """
    if not os.environ.get(RESULTS_ENV):
        return
    if not any(isinstance(f, _RecordChecks) for f in sys.meta_path):
        sys.meta_path.insert(0, _RecordChecks())
    for name, module in list(sys.modules.items()):
        if _is_check_module(name) and isinstance(module, types.ModuleType):
            module.__class__ = _RecordingModule


_install_recorder()


def check_timeout_s() -> float:
    """Seconds a distributed check may run: ``cl.core.checks.CHECK_TIMEOUT_S``."""
    return sys.modules["clusterlab.core.checks"].CHECK_TIMEOUT_S


def not_attempted(name: str) -> bool:
    """Say that the exercise is still a stub; return False."""
    _verdict(name, "not attempted", "it still raises NotImplementedError")
    print(
        f"not attempted: {name} still raises NotImplementedError; "
        "write it, then run this cell again"
    )
    return False


def passed(name: str, what: str) -> bool:
    """Print the tick line for a passed check; return True."""
    _verdict(name, "pass", what)
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
    from clusterlab.core.launcher import launch
    from clusterlab.core.supervisor import LaunchError

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
