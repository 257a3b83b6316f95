"""Happened-before, Lamport clocks and vector clocks over a message exchange.

An event ``a`` *happened before* ``b`` (Lamport 1978) if ``a`` comes before
``b`` on the same process, or ``a`` sends a message that ``b`` receives, or a
chain of such steps leads from ``a`` to ``b``. Two events neither of which
happened before the other are *concurrent*.

* A **Lamport clock** is one counter per process: add one at every event, and
  on a receive first jump past the counter the message carries. If ``a``
  happened before ``b`` then ``L(a) < L(b)``; the converse does not hold.
* A **vector clock** keeps one counter per process. ``V(a) < V(b)``
  (every entry ``<=``, and the vectors differ) exactly when ``a`` happened
  before ``b``, so vectors also detect concurrency.

A *history* is the list of events in the order they happened anywhere, each a
tuple ``(process, kind, msg)`` with ``kind`` one of ``"local"``, ``"send"``,
``"recv"`` and ``msg`` a message id (``None`` for local events). ``simulate``
makes one with SimPy, with each process stamping events on its own drifting
wall clock, so the wall-clock order can disagree with the order of causes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import simpy

from clusterlab.core.validate import check_float, check_int

KINDS = ("local", "send", "recv")


def _check_history(history, n_processes: int) -> None:
    sent: dict = {}
    received = set()
    for i, ev in enumerate(history):
        if len(ev) != 3:
            raise ValueError(f"history[{i}]={ev!r} must be (process, kind, msg)")
        proc, kind, msg = ev
        check_int(f"history[{i}] process", proc, 0, n_processes - 1)
        if kind not in KINDS:
            raise ValueError(f"history[{i}] kind={kind!r}: choose one of {KINDS}")
        if kind == "send":
            if msg in sent:
                raise ValueError(f"history[{i}]: message {msg!r} is sent twice")
            sent[msg] = proc
        elif kind == "recv":
            if msg not in sent:
                raise ValueError(
                    f"history[{i}]: message {msg!r} is received before it is sent"
                )
            if msg in received:
                raise ValueError(f"history[{i}]: message {msg!r} is received twice")
            received.add(msg)


def lamport_clocks(history, n_processes: int) -> list[int]:
    """Lamport timestamps of every event in ``history`` (same order).

    Args:
        history: list of ``(process, kind, msg)`` in the order they happened.
        n_processes: number of processes, in [1, 1000].

    Returns:
        One integer per event.
    """
    check_int("n_processes", n_processes, 1, 1000)
    _check_history(history, n_processes)
    counter = [0] * n_processes
    carried: dict = {}
    out = []
    for proc, kind, msg in history:
        if kind == "recv":
            # The receive rule: jump past the sender's time, then tick.
            counter[proc] = max(counter[proc], carried[msg])
        counter[proc] += 1
        if kind == "send":
            carried[msg] = counter[proc]
        out.append(counter[proc])
    return out


def vector_clocks(history, n_processes: int) -> list[tuple[int, ...]]:
    """Vector timestamps of every event in ``history`` (same order).

    Args:
        history: list of ``(process, kind, msg)`` in the order they happened.
        n_processes: number of processes, in [1, 1000].

    Returns:
        One tuple of ``n_processes`` integers per event.
    """
    check_int("n_processes", n_processes, 1, 1000)
    _check_history(history, n_processes)
    vec = [[0] * n_processes for _ in range(n_processes)]
    carried: dict = {}
    out = []
    for proc, kind, msg in history:
        v = vec[proc]
        if kind == "recv":
            # Take the entrywise maximum: everything the sender knew of.
            v[:] = [max(a, b) for a, b in zip(v, carried[msg], strict=True)]
        v[proc] += 1
        if kind == "send":
            carried[msg] = tuple(v)
        out.append(tuple(v))
    return out


def happened_before(u, v) -> bool:
    """True if the event stamped ``u`` happened before the one stamped ``v``.

    Vector timestamps: every entry of ``u`` is ``<=`` that of ``v`` and the
    two differ.
    """
    if len(u) != len(v):
        raise ValueError(f"u={u!r} and v={v!r} must have the same length")
    return all(a <= b for a, b in zip(u, v, strict=True)) and tuple(u) != tuple(v)


def concurrent(u, v) -> bool:
    """True if neither vector timestamp happened before the other (and u != v)."""
    return (
        not happened_before(u, v) and not happened_before(v, u) and tuple(u) != tuple(v)
    )


def causal_order(history, n_processes: int) -> np.ndarray:
    """The happened-before relation itself, from the history (no clocks).

    Returns:
        A boolean matrix ``hb`` with ``hb[i, j]`` True when event ``i``
        happened before event ``j`` (the transitive closure of process order
        and message edges). Used to test the clocks.
    """
    check_int("n_processes", n_processes, 1, 1000)
    _check_history(history, n_processes)
    n = len(history)
    hb = np.zeros((n, n), dtype=bool)
    last = [None] * n_processes
    send_at: dict = {}
    for j, (proc, kind, msg) in enumerate(history):
        # Events are in happening order, so every cause of j is already closed.
        for i in ([last[proc]] if last[proc] is not None else []) + (
            [send_at[msg]] if kind == "recv" else []
        ):
            hb[i, j] = True
            hb[:, j] |= hb[:, i]
        if kind == "send":
            send_at[msg] = j
        last[proc] = j
    return hb


@dataclass(frozen=True)
class LogicalParams:
    """A random message exchange between processes with skewed wall clocks.

    Attributes:
        n_processes: number of processes, in [2, 16].
        n_events: events per process, in [1, 200].
        send_prob: chance that an event (other than a receive) sends a message.
        mean_gap_s: mean time between a process's own events (exponential).
        delay_s: network delay of each message, before jitter.
        jitter_s: mean extra delay per message (exponential).
        clock_offsets_s: each process's wall-clock offset from true time;
            ``None`` draws them uniformly in ±max_offset_s.
        max_offset_s: spread of the drawn offsets, in [0, 10] s.
    """

    n_processes: int = 3
    n_events: int = 3
    send_prob: float = 0.6
    mean_gap_s: float = 8e-3
    delay_s: float = 2e-3
    jitter_s: float = 1e-3
    clock_offsets_s: tuple[float, ...] | None = None
    max_offset_s: float = 10e-3

    def __post_init__(self):
        check_int("n_processes", self.n_processes, 2, 16)
        check_int("n_events", self.n_events, 1, 200)
        check_float("send_prob", self.send_prob, 0.0, 1.0)
        check_float("mean_gap_s", self.mean_gap_s, 0.0, 10.0, low_inclusive=False)
        check_float("delay_s", self.delay_s, 0.0, 10.0)
        check_float("jitter_s", self.jitter_s, 0.0, 10.0)
        check_float("max_offset_s", self.max_offset_s, 0.0, 10.0)
        if self.clock_offsets_s is not None:
            if len(self.clock_offsets_s) != self.n_processes:
                raise ValueError(
                    f"clock_offsets_s={self.clock_offsets_s!r} must give one "
                    f"offset per process (n_processes={self.n_processes})"
                )
            for o in self.clock_offsets_s:
                check_float("clock_offsets_s", o, -10.0, 10.0)


def simulate_messages(params: LogicalParams, seed: int = 0) -> pd.DataFrame:
    """Run a random exchange; stamp each event with wall, Lamport and vector time.

    Each process does ``n_events`` events of its own (local or send, at random
    gaps); every message it receives adds a receive event when it arrives.

    Args:
        params: a ``LogicalParams``.
        seed: seeds the gaps, choices, delays and (if drawn) clock offsets.

    Returns:
        One row per event, in true-time order: ``event`` (label such as
        ``"P1.3"``), ``process``, ``kind``, ``msg`` (message id or -1), ``peer``
        (the other end of a message or -1), ``true_s``, ``wall_s`` (the
        process's own clock), ``lamport`` and ``vector`` (a tuple).
    """
    if not isinstance(params, LogicalParams):
        raise ValueError(f"params={params!r} must be a LogicalParams")
    p = params
    rng = np.random.default_rng(seed)
    offsets = (
        np.asarray(p.clock_offsets_s, dtype=float)
        if p.clock_offsets_s is not None
        else rng.uniform(-p.max_offset_s, p.max_offset_s, p.n_processes)
    )
    env = simpy.Environment()
    log: list[tuple] = []  # (true_s, process, kind, msg, peer)
    counter = iter(range(10**9))

    def deliver(msg, src, dst):
        yield env.timeout(p.delay_s + rng.exponential(p.jitter_s) if p.jitter_s else 0)
        log.append((env.now, dst, "recv", msg, src))

    def process(i):
        for _ in range(p.n_events):
            yield env.timeout(rng.exponential(p.mean_gap_s))
            if rng.random() < p.send_prob:
                dst = int(rng.choice([q for q in range(p.n_processes) if q != i]))
                msg = next(counter)
                log.append((env.now, i, "send", msg, dst))
                env.process(deliver(msg, i, dst))
            else:
                log.append((env.now, i, "local", -1, -1))

    for i in range(p.n_processes):
        env.process(process(i))
    env.run()
    df = pd.DataFrame(log, columns=["true_s", "process", "kind", "msg", "peer"])
    df = df.sort_values("true_s", kind="stable").reset_index(drop=True)
    history = [
        (int(r.process), r.kind, None if r.msg < 0 else int(r.msg))
        for r in df.itertuples()
    ]
    df["wall_s"] = df["true_s"] + offsets[df["process"].to_numpy()]
    df["lamport"] = lamport_clocks(history, p.n_processes)
    df["vector"] = vector_clocks(history, p.n_processes)
    seq = df.groupby("process").cumcount() + 1
    df["event"] = "P" + df["process"].astype(str) + "." + seq.astype(str)
    cols = ["event", "process", "kind", "msg", "peer", "true_s", "wall_s"]
    return df[cols + ["lamport", "vector"]]


__all__ = [
    "LogicalParams",
    "causal_order",
    "concurrent",
    "happened_before",
    "lamport_clocks",
    "simulate_messages",
    "vector_clocks",
]
