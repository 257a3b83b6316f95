"""Group the stack dumps of a hung job's ranks so that the odd rank stands out.

A hung data-parallel job usually has one of two shapes: most ranks wait in the
same collective, and one rank is somewhere else (in its data loader, in another
collective, ahead in a barrier). A dump of every rank's Python stack shows it,
but a thousand dumps are unreadable one by one; grouped by stack, they become a
few lines: "1021 ranks in all_reduce, 3 ranks in load_batch".

``parse_stack`` reads the two formats the debugging lab produces:

* ``py-spy dump --pid PID``: ``Thread 123 (idle): "MainThread"`` then one line
  per frame, innermost first: ``    all_reduce (torch/distributed/...py:3252)``;
* Python's ``faulthandler`` (and ``format_current_frames``, its pure-Python
  twin): ``Thread 0x... (most recent call first):`` then
  ``  File "/path/x.py", line 12 in func``.

``group_stacks`` keys each rank on the function names and file names of its
main thread (not the line numbers, which differ between a dump taken by py-spy
and one by faulthandler), and ``odd_ranks`` names the ranks outside the largest
group.
"""

from __future__ import annotations

import os
import re
import sys
import threading

import pandas as pd

_PYSPY_THREAD = re.compile(r"^Thread (\S+) \(([^)]*)\)(?:: \"(.*)\")?\s*$")


_PYSPY_FRAME = re.compile(r"^\s+(\S.*?) \(([^()]*?)(?::(\d+))?\)\s*$")


_FH_THREAD = re.compile(
    r"^(Current thread|Thread) (0x[0-9a-f]+).*most recent call first"
)


_FH_FRAME = re.compile(r'^\s+File "(.*)", line (\d+),? in (\S+)')


#: Frames a dump shows below the worker (the launcher, the fork): cut there.
_ENTRY = "_rank_main"


#: Terminal colour codes, which some tools add even when writing to a pipe.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


#: Decorators between a collective and its caller, skipped by ``stack_top``.
_WRAPPERS = ("wrapper", "_wrapper")


#: torch's own files a collective passes through, skipped by ``caller``.
_TORCH_FILES = ("c10d_logger.py", "distributed_c10d.py")


def _frame(func: str, path: str, line) -> dict:
    return {
        "func": func.rsplit(".", 1)[-1],  # py-spy gives qualnames, faulthandler not
        "file": os.path.basename(path),
        "line": int(line) if line else None,
    }


def _threads(text: str) -> list[list[dict]]:
    """Every thread's frames, innermost first, in the order of the dump."""
    threads: list[list[dict]] = []
    for raw in _ANSI.sub("", text).splitlines():
        if _PYSPY_THREAD.match(raw) or _FH_THREAD.match(raw):
            threads.append([])
            continue
        m = _FH_FRAME.match(raw)
        if m and threads:
            threads[-1].append(_frame(m.group(3), m.group(1), m.group(2)))
            continue
        m = _PYSPY_FRAME.match(raw)
        if m and threads:
            threads[-1].append(_frame(m.group(1), m.group(2), m.group(3)))
    return threads


def parse_stack(text: str) -> list[dict]:
    """The frames of a dump's worker thread, innermost first.

    The worker thread is the one that runs the rank's entry point (the launcher's
    ``_rank_main``), or else the first thread with frames. Frames below the entry
    point (the fork, the launcher) are dropped.

    Args:
        text: the output of ``py-spy dump`` or of ``faulthandler``.

    Returns:
        A list of ``{"func", "file", "line"}`` dicts; empty if none was found.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a str (a stack dump), got {type(text)}")
    threads = [t for t in _threads(text) if t]
    if not threads:
        return []
    main = next((t for t in threads if any(f["func"] == _ENTRY for f in t)), None)
    frames = main or threads[0]
    names = [f["func"] for f in frames]
    return frames[: names.index(_ENTRY)] if _ENTRY in names else frames


def stack_top(frames: list[dict]) -> str:
    """The innermost function of a stack that is not a decorator's wrapper."""
    for f in frames:
        if f["func"] not in _WRAPPERS:
            return f["func"]
    return frames[0]["func"] if frames else "(no Python frames)"


def group_stacks(dumps: dict) -> pd.DataFrame:
    """Group ranks whose worker threads stand in the same place.

    Args:
        dumps: rank -> dump text (py-spy or faulthandler; formats may be mixed).

    Returns:
        One row per group, largest first, with ``group`` (0, 1, ...),
        ``ranks`` (a sorted tuple), ``n_ranks``, ``top`` (the innermost
        function, wrappers skipped), ``caller`` (the innermost frame outside
        torch, as ``func (file:line)``) and ``stack`` (function names, innermost
        first, joined by `` < ``).
    """
    if not isinstance(dumps, dict) or not dumps:
        raise ValueError("dumps must be a non-empty dict of rank -> dump text")
    groups: dict[tuple, list[int]] = {}
    first: dict[tuple, list[dict]] = {}
    for rank, text in sorted(dumps.items()):
        frames = parse_stack(text)
        key = tuple((f["func"], f["file"]) for f in frames)
        groups.setdefault(key, []).append(int(rank))
        first.setdefault(key, frames)
    rows = []
    for key, ranks in groups.items():
        frames = first[key]
        own = [f for f in frames if f["file"] not in _TORCH_FILES]
        caller = own[0] if own else (frames[0] if frames else None)
        where = (
            f"{caller['func']} ({caller['file']}:{caller['line']})" if caller else ""
        )
        rows.append(
            dict(
                ranks=tuple(ranks),
                n_ranks=len(ranks),
                top=stack_top(frames),
                caller=where,
                stack=" < ".join(f["func"] for f in frames) or "(no Python frames)",
            )
        )
    df = pd.DataFrame(rows).sort_values(
        ["n_ranks", "ranks"], ascending=[False, True], ignore_index=True
    )
    df.insert(0, "group", range(len(df)))
    return df


def odd_ranks(groups: pd.DataFrame) -> list[int]:
    """The ranks outside the one largest group; [] if no group is the largest.

    Args:
        groups: the result of ``group_stacks``.

    Returns:
        Sorted ranks. With one group (every rank in the same place) or a tie for
        the largest (two halves), there is no majority to stand out from: [].
    """
    if not isinstance(groups, pd.DataFrame) or not {"ranks", "n_ranks"} <= set(
        groups.columns
    ):
        raise ValueError("groups must be the DataFrame that group_stacks returns")
    sizes = groups["n_ranks"].tolist()
    if len(sizes) < 2 or sizes.count(max(sizes)) > 1:
        return []
    largest = groups.loc[groups["n_ranks"].idxmax(), "ranks"]
    return sorted(r for ranks in groups["ranks"] for r in ranks if r not in largest)


def format_current_frames() -> str:
    """This process's Python stacks, in ``faulthandler``'s layout, from Python.

    ``sys._current_frames`` gives every thread's frame; a Python signal handler
    can print them, but only when the main thread next runs Python code, so a
    rank blocked inside a C++ collective never prints. ``faulthandler`` writes
    from C and does not wait: that is the fallback the debugging lab uses. The
    calling thread comes first, as in ``faulthandler``'s dumps.
    """
    names = {t.ident: t.name for t in threading.enumerate()}
    me = threading.get_ident()
    lines = []
    frames = sorted(sys._current_frames().items(), key=lambda kv: kv[0] != me)
    for ident, frame in frames:
        lines.append(
            f"Thread {ident:#018x} ({names.get(ident, '?')}, most recent call first):"
        )
        while frame is not None:
            code = frame.f_code
            lines.append(
                f'  File "{code.co_filename}", line {frame.f_lineno} in {code.co_name}'
            )
            frame = frame.f_back
        lines.append("")
    return "\n".join(lines)


__all__ = [
    "format_current_frames",
    "group_stacks",
    "odd_ranks",
    "parse_stack",
    "stack_top",
]
