"""Is a history of a register linearizable? A small Wing-Gong-Lowe search.

A history is what clients saw: each operation's invocation and completion time
and its result. It is **linearizable** when every operation can be given one
instant between its invocation and its completion such that, taken in that
order, the operations are those of one register: each read returns the value
of the latest write before it (or the initial value). This is the guarantee
etcd gives its reads and writes, and the one Jepsen tests check.

An operation whose outcome the client never learned (a write that timed out)
may have taken effect at any instant after its invocation, or never: it is
given the completion time infinity, so the search may place it anywhere later,
including after everything else (the same as never). A read that failed
returned nothing and constrains nothing: leave it out.

The search is Lowe's version of Wing and Gong's: walk the history in time
order; at an invocation, try to linearize that operation now; at a
completion of an operation not yet linearized, undo the last choice. A cache
of (operations linearized, register value) states already tried keeps it fast
on histories of a few clients.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Results an operation may have.
OUTCOMES = ("ok", "unknown")


@dataclass(frozen=True)
class Op:
    """One client operation on the register.

    Attributes:
        process: the client that ran it.
        kind: ``"write"`` or ``"read"``.
        value: the value written, or the value the read returned.
        invoke_s: when the client sent it.
        complete_s: when the client had its answer (``math.inf`` for unknown).
    """

    process: int
    kind: str
    value: object
    invoke_s: float
    complete_s: float


def ops_from_records(records) -> list[Op]:
    """``Op`` objects from client records (dicts with ``process, kind, value,
    invoke_s, complete_s, outcome``); failed reads are dropped, writes of
    unknown outcome complete at infinity, failed writes are dropped (their
    error came from the server, so they did not happen)."""
    ops = []
    for i, r in enumerate(records):
        kind, outcome = r.get("kind"), r.get("outcome")
        if kind not in ("read", "write"):
            raise ValueError(f"records[{i}]: kind={kind!r} must be 'read' or 'write'")
        if outcome not in (*OUTCOMES, "failed"):
            raise ValueError(
                f"records[{i}]: outcome={outcome!r} must be one of ok, unknown, failed"
            )
        if outcome == "failed" or (kind == "read" and outcome != "ok"):
            continue
        done = float(r["complete_s"]) if outcome == "ok" else math.inf
        ops.append(Op(int(r["process"]), kind, r["value"], float(r["invoke_s"]), done))
    return ops


def check_linearizable(ops, initial=None) -> tuple[bool, str]:
    """Search for a linearization of ``ops`` on one register.

    Args:
        ops: ``Op`` objects (any order).
        initial: the register's value before any write.

    Returns:
        ``(True, text)`` with the number of operations, or ``(False, text)``
        naming the operation that could not be placed.
    """
    ops = list(ops)
    for i, op in enumerate(ops):
        if op.kind not in ("read", "write"):
            raise ValueError(f"ops[{i}].kind={op.kind!r} must be 'read' or 'write'")
        if not op.invoke_s <= op.complete_s:
            raise ValueError(
                f"ops[{i}]: complete_s={op.complete_s} is before invoke_s={op.invoke_s}"
            )
    if not ops:
        return True, "an empty history is linearizable"
    # events: (time, 0 for an invocation, 1 for a completion, op index); an
    # invocation at the same instant as a completion comes first (overlap).
    events = sorted(
        [(op.invoke_s, 0, i) for i, op in enumerate(ops)]
        + [(op.complete_s, 1, i) for i, op in enumerate(ops)]
    )
    n = len(events)
    # a doubly linked list over the events, with a head sentinel at index n
    nxt = list(range(1, n + 1)) + [0]
    prv = [n] + list(range(n - 1)) + [n - 1]
    nxt[n], prv[n] = 0, n - 1
    nxt[n - 1] = n
    where = {}
    for e, (_, is_return, i) in enumerate(events):
        where[(i, is_return)] = e

    def unlink(e: int) -> None:
        nxt[prv[e]], prv[nxt[e]] = nxt[e], prv[e]

    def relink(e: int) -> None:
        nxt[prv[e]] = prv[nxt[e]] = e

    def undo():
        """Take back the last placed operation; resume just after its invocation."""
        e0, before, placed = stack.pop()
        i0 = events[e0][2]
        relink(where[(i0, 1)])  # the reverse of the order they were unlinked in
        relink(e0)
        return nxt[e0], before, placed

    state, done, seen, stack = initial, 0, set(), []
    e, most, deepest, blocked = nxt[n], 0, -1, None
    while nxt[n] != n:
        if e == n:  # past the end: nothing more fits from here
            if not stack:
                break
            e, state, done = undo()
            continue
        _, is_return, i = events[e]
        if not is_return:
            op = ops[i]
            fits = op.kind == "write" or op.value == state
            after = op.value if op.kind == "write" else state
            key = (done | (1 << i), _hashable(after))
            if fits and key not in seen:
                seen.add(key)
                stack.append((e, state, done))
                state, done = after, done | (1 << i)
                unlink(e)
                unlink(where[(i, 1)])
                most = max(most, len(stack))
                e = nxt[n]
            else:
                e = nxt[e]
        else:  # this operation had to be placed by now, and was not
            if len(stack) > deepest:  # the furthest the search got: name it
                deepest, blocked = len(stack), i
            if not stack:
                return False, _failure(ops, blocked, initial, most)
            e, state, done = undo()
    if nxt[n] == n:
        return True, f"{len(ops)} operations linearized on one register"
    return False, f"no linearization: at most {most} of {len(ops)} operations placed"


def _hashable(value):
    return value if isinstance(value, int | str | float | type(None)) else repr(value)


def _failure(ops, i: int, initial, most: int) -> str:
    op = ops[i]
    what = (
        f"{op.kind} of {op.value!r}"
        if op.kind == "write"
        else (f"read returning {op.value!r}")
    )
    return (
        f"not linearizable: process {op.process}'s {what}, invoked at "
        f"{op.invoke_s:.3f} s and answered at {op.complete_s:.3f} s, has no instant "
        f"where the register holds what it needs (initial value {initial!r}; "
        f"at most {most} of {len(ops)} operations placed)"
    )


__all__ = ["OUTCOMES", "Op", "check_linearizable", "ops_from_records"]
