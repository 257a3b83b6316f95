"""A replica group's link cut, beside the SIGKILL: torchft across emulated nodes.

A SIGKILL closes the dead process's sockets: the kernel answers its peers' next
packets with a reset, their collective fails at once, and they go on in the
next quorum, which the lighthouse forms without the dead group once it stops
hearing its heartbeats (``measure.HEARTBEAT_TIMEOUT_S``). A cut link says
nothing. If it catches a collective with the silent group in flight, the
survivors learn of it only when that collective's timeout runs out; if it
falls between collectives, the next quorum simply leaves the group out, as
after a crash. So a cut costs the survivors up to the collective timeout,
where a kill costs about a heartbeat timeout.

And the cut-off group is not dead. Its own collective times out too, its
quorum request waits, and once the link is back it asks again, finds itself
steps behind, and heals from a live peer in the same process: no restart.

``cut_and_heal`` runs the lighthouse and one group per emulated node
(``cl.cluster``; every listener on loopback or on the node's own address),
cuts one node off from the others both ways for ``cut_s`` seconds and heals the
cut. ``cut_summary`` reads the run; ``measure_or_recorded`` falls back to the
book's recorded runs (``data/torchft_cut_runs.csv``) where nodes cannot be
emulated.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from clusterlab.core.validate import check_float, check_int
from clusterlab.fault_tolerance import loopback
from clusterlab.fault_tolerance.measure import (
    HEARTBEAT_TIMEOUT_S,
    JOIN_TIMEOUT_S,
    QUORUM_TICK_S,
    back_after_kill,
    read_logs,
)

TABLE = "torchft_cut_runs"
#: the lab's run: three groups, the last one cut off for three seconds (in a
#: longer cut its own quorum request times out and it exits, to be restarted)
EXPERIMENT = dict(n_groups=3, steps=160, cut=2, cut_after_s=1.0, cut_s=3.0,
                  timeout_s=2.0, step_ms=25.0)  # fmt: skip
COLUMNS = ["timeout_s", "heartbeat_s", "cut_s", "stall_s", "back_s",
           "restarts", "healed_from", "steps"]  # fmt: skip


@dataclass
class CutRun:
    """What ``cut_and_heal`` saw.

    Attributes:
        log: one row per committed step and group (``measure.LOG_COLUMNS``).
        cut: the replica id of the group whose node was cut off.
        cut_time, heal_time: ``time.time()`` of the cut and of the heal.
        timeout_s: the groups' collective timeout.
        steps: the step every group trained to.
        node_addresses: each node's address (group ``i`` on node ``i``).
        listeners: every listening address seen, ``{process name: [IP:PORT]}``.
        exit_codes: ``{process name: return code}`` of the groups.
    """

    log: pd.DataFrame
    cut: str
    cut_time: float
    heal_time: float
    timeout_s: float
    steps: int
    node_addresses: list
    listeners: dict = field(default_factory=dict)
    exit_codes: dict = field(default_factory=dict)
    folder: str = ""


def _last_step(path: Path) -> int:
    lines = path.read_text().splitlines() if path.exists() else []
    for line in reversed(lines):
        try:
            return int(json.loads(line)["step"])
        except (json.JSONDecodeError, KeyError):  # a line half written
            continue
    return 0


def cut_and_heal(
    *,
    n_groups: int = 3,
    steps: int = 160,
    cut: int = 2,
    cut_after_s: float = 1.0,
    cut_s: float = 3.0,
    timeout_s: float = 2.0,
    step_ms: float = 25.0,
    batch: int = 4,
    seed: int = 0,
    rate_mbit: float = 1000.0,
    run_timeout_s: float = 120.0,
    workdir: str | None = None,
) -> CutRun:
    """Cut one group's node off, heal the cut, and wait for every group to finish.

    Args:
        n_groups: replica groups, one per emulated node, in [3, 8] (a commit
            needs a majority, so the survivors of one cut can go on).
        steps: the step every group trains to, in [20, 100000].
        cut: the replica id whose node is cut off, in [1, n_groups - 1]
            (node 0 holds the lighthouse).
        cut_after_s: seconds after every group's first commit, in (0, 600].
        cut_s: how long the cut lasts, seconds, in (0, 600].
        timeout_s: each group's collective timeout, seconds, in [0.5, 60].
        step_ms, batch, seed: passed to every group.
        rate_mbit: each node's link, Mbit/s (the run sends little).
        run_timeout_s: the whole run's limit, in (0, 3600].
        workdir: where logs go (a new temporary folder when None).

    Raises:
        clusterlab.cluster.emulated.CannotEmulate: where nodes cannot be made
        (``cl.cluster.support.why_not`` says why).
    """
    from clusterlab.cluster.emulated import EmulatedCluster
    from clusterlab.cluster.topology import Topology

    n_groups = check_int("n_groups", n_groups, 3, 8)
    steps = check_int("steps", steps, 20, 100_000)
    cut = check_int("cut", cut, 1, n_groups - 1)
    cut_after_s = check_float("cut_after_s", cut_after_s, 0.0, 600.0,
                              low_inclusive=False)  # fmt: skip
    cut_s = check_float("cut_s", cut_s, 0.0, 600.0, low_inclusive=False)
    timeout_s = check_float("timeout_s", timeout_s, 0.5, 60.0)
    run_timeout_s = check_float("run_timeout_s", run_timeout_s, 0.0, 3600.0,
                                low_inclusive=False)  # fmt: skip
    folder = Path(workdir or tempfile.mkdtemp(prefix="torchft-cut-"))
    env = dict(os.environ, OMP_NUM_THREADS="1", RUST_LOG="warn", PYTHONUNBUFFERED="1")
    majority = n_groups // 2 + 1
    deadline = time.monotonic() + run_timeout_s
    procs, paths = {}, {}

    def start(node: int, name: str, argv: list) -> None:
        with open(folder / f"{name}.out", "w") as out:
            procs[name] = cluster.popen(node, argv, env=env, stdout=out,
                                        stderr=subprocess.STDOUT)  # fmt: skip

    def wait(predicate, what: str) -> None:
        while not predicate():
            dead = {
                n: p.returncode for n, p in procs.items() if p.poll() not in (None, 0)
            }
            if dead:
                tails = {n: (folder / f"{n}.out").read_text()[-600:] for n in dead}
                raise RuntimeError(f"while waiting for {what}, processes failed: "
                                   f"{dead}\n{tails}")  # fmt: skip
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what} within {run_timeout_s:g} s")
            time.sleep(0.02)

    with EmulatedCluster(Topology(nodes=n_groups, rate_mbit=rate_mbit)) as cluster:
        addrs = [cluster.address(i) for i in range(n_groups)]
        url = f"http://{addrs[0]}:29510"
        start(0, "lighthouse", [
            os.path.join(os.path.dirname(sys.executable), "torchft_lighthouse"),
            "--bind", f"{addrs[0]}:29510", "--min_replicas", str(majority),
            "--join_timeout_ms", str(round(JOIN_TIMEOUT_S * 1000)),
            "--quorum_tick_ms", str(round(QUORUM_TICK_S * 1000)),
            "--heartbeat_timeout_ms", str(round(HEARTBEAT_TIMEOUT_S * 1000)),
        ])  # fmt: skip
        for rid in range(n_groups):
            paths[(str(rid), 0)] = folder / f"replica{rid}_life0.jsonl"
            start(rid, f"replica{rid}", [
                sys.executable, "-m", "clusterlab.fault_tolerance.train",
                "--lighthouse", url, "--replica-id", rid, "--steps", steps,
                "--batch", batch, "--seed", seed, "--step-ms", step_ms,
                "--min-replicas", majority, "--timeout-s", timeout_s,
                "--max-seconds", run_timeout_s, "--host", addrs[rid],
                "--log", paths[(str(rid), 0)],
            ])  # fmt: skip
        groups = [f"replica{r}" for r in range(n_groups)]
        wait(lambda: all(_last_step(paths[(str(r), 0)]) >= 1 for r in range(n_groups)),
             "every group's first commit")  # fmt: skip
        due = time.monotonic() + cut_after_s
        wait(lambda: time.monotonic() >= due, "the cut")
        listeners = {n: loopback.listening_addresses(p.pid) for n, p in procs.items()}
        others = [n for n in range(n_groups) if n != cut]
        cut_time = time.time()
        cluster.partition([cut], others)
        due = time.monotonic() + cut_s
        wait(lambda: time.monotonic() >= due, "the heal")
        cluster.heal()
        heal_time = time.time()
        wait(lambda: all(procs[n].poll() is not None for n in groups),
             "every group's last step")  # fmt: skip
        codes = {n: procs[n].returncode for n in groups}
        if codes[f"replica{cut}"] != 0 and all(
            c == 0 for n, c in codes.items() if n != f"replica{cut}"
        ):
            tail = (folder / f"replica{cut}.out").read_text()[-400:]
            raise RuntimeError(
                f"the survivors reached step {steps} before the cut-off group "
                f"rejoined (it exited {codes[f'replica{cut}']}): give the run more "
                f"steps after the heal\n{tail}"
            )
        for p in procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()
    log = read_logs(paths)
    return CutRun(
        log=log, cut=str(cut), cut_time=cut_time, heal_time=heal_time,
        timeout_s=timeout_s, steps=steps, node_addresses=addrs,
        listeners=listeners, exit_codes=codes, folder=str(folder),
    )  # fmt: skip


def cut_summary(run: CutRun) -> dict:
    """What the cut cost, read from the run's log.

    Returns:
        ``timeout_s``, ``heartbeat_s`` (the lighthouse's), ``cut_s`` (the
        cut's length), ``stall_s`` (the cut to the survivors' next commit),
        ``back_s`` (the heal to the cut-off group's next commit),
        ``restarts`` (0: the cut-off group came back in the same process),
        ``healed_from`` (the peer it healed from, "group ID") and ``steps``.
    """
    log = run.log
    mine = log[log["replica_id"] == run.cut]
    before = mine[mine["time"] <= run.cut_time]
    last = int(before["step"].max()) if len(before) else 0
    stall = (
        float(back_after_kill(log, run.cut, run.cut_time, last)["time"]) - run.cut_time
    )
    after = mine[mine["time"] > run.heal_time].sort_values("time")
    if after.empty:
        raise RuntimeError(
            f"the cut-off group {run.cut} committed nothing after the heal: "
            f"exit codes {run.exit_codes}; logs in {run.folder}"
        )
    healed = after["healed_from"].dropna()
    return {
        "timeout_s": float(run.timeout_s),
        "heartbeat_s": float(HEARTBEAT_TIMEOUT_S),
        "cut_s": float(run.heal_time - run.cut_time),
        "stall_s": stall,
        "back_s": float(after["time"].iloc[0]) - run.heal_time,
        "restarts": int(mine["life"].max()),
        "healed_from": f"group {healed.iloc[0]}" if len(healed) else None,
        "steps": int(run.steps),
    }


def recorded() -> pd.DataFrame:
    """The book's recorded cuts, with their provenance columns."""
    import clusterlab.core.published as published

    return published.load(TABLE)


def measure_or_recorded(tries: int = 2, say=print, **kwargs):
    """One cut measured across emulated nodes here, or the recorded ones.

    A run whose cut-off group missed its rejoin (the survivors finished first:
    after a cut, TCP's retransmissions back off, and on a busy machine the
    group can ask again late) is run once more, said in words; any other
    failure is raised.

    Args:
        tries: runs at most, in [1, 3].
        say: where the sentence about a repeated run goes.
        **kwargs: passed to ``cut_and_heal`` (``EXPERIMENT`` by default).

    Returns:
        ``(table, note, run)``: one row per cut (``COLUMNS``), a sentence saying
        where it is from, and the run (None for the recorded rows).
    """
    from clusterlab.cluster.recorded import here_or_recorded, recorded_note
    from clusterlab.fault_tolerance.measure import torchft_missing

    tries = check_int("tries", tries, 1, 3)
    missing = torchft_missing()
    if missing:
        df = recorded()
        return df[COLUMNS].copy(), recorded_note(missing, df), None
    runs = []

    def here():
        for attempt in range(1, tries + 1):
            try:
                runs.append(cut_and_heal(**{**EXPERIMENT, **kwargs}))
                break
            except RuntimeError as err:
                if attempt == tries or "before the cut-off group rejoined" not in str(
                    err
                ):
                    raise
                say(f"try {attempt} of {tries}: the cut-off group rejoined too late "
                    "for the survivors; running the cut again")  # fmt: skip
        return pd.DataFrame([cut_summary(runs[-1])])[COLUMNS]

    table, note = here_or_recorded(here, recorded, COLUMNS)
    return table, note, (runs[-1] if runs else None)


__all__ = [
    "COLUMNS",
    "EXPERIMENT",
    "TABLE",
    "CutRun",
    "cut_and_heal",
    "cut_summary",
    "measure_or_recorded",
    "recorded",
]
