"""A fault-tolerant run measured: a lighthouse, groups, one SIGKILL, a restart.

``kill_and_heal`` starts torchft's lighthouse and ``n_groups`` replica groups
(``python -m clusterlab.fault_tolerance.train``, one process each, on loopback),
kills one group with SIGKILL once it has committed ``kill_at_step``, restarts it
after ``restart_after_s`` and waits for every group to reach ``steps``. It
returns the committed steps as a table and the moments of the kill and the
restart; ``recovery_summary`` turns them into the figures of the lab.
Every process runs in its own session and is killed in ``finally``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from clusterlab.core.validate import check_float, check_int
from clusterlab.fault_tolerance import loopback

#: The lighthouse's settings in ``kill_and_heal``: a group that stops heart-beating
#: for ``HEARTBEAT_TIMEOUT_S`` is dead, and a quorum waits ``JOIN_TIMEOUT_S`` at
#: most for late members.
HEARTBEAT_TIMEOUT_S = 1.0
JOIN_TIMEOUT_S = 1.0
QUORUM_TICK_S = 0.05

LOG_COLUMNS = [
    "step", "replica_id", "participants", "samples", "step_samples", "params_sha256",
    "healed_from", "time", "life",
]  # fmt: skip

KILL_COLUMNS = ["replica_id", "life", "time", "restart_time", "step"]


@dataclass
class FaultRun:
    """What ``kill_and_heal`` saw.

    Attributes:
        log: one row per committed step and group (``LOG_COLUMNS``; ``life`` is
            0 for a group's first process, 1 for the restarted one).
        killed: the id of the group that was killed.
        kill_time, restart_time: ``time.time()`` of the SIGKILL and the restart.
        kill_step: the last step the killed group committed before it died.
        steps: the step every group trained to.
        listeners: every listening address seen, ``{process name: [IP:PORT]}``.
        exit_codes: ``{process name: return code}`` of the groups.
        pids: ``{process name: pid}`` of every process started (all ended).
        kills: one row per kill (``KILL_COLUMNS``): the group, its life, the
            ``time.time()`` of the SIGKILL and of the restart, the last step
            it committed. ``killed``, ``kill_time``... are the first row's.
    """

    log: pd.DataFrame
    killed: str
    kill_time: float
    restart_time: float
    kill_step: int
    steps: int
    listeners: dict = field(default_factory=dict)
    exit_codes: dict = field(default_factory=dict)
    pids: dict = field(default_factory=dict)
    kills: pd.DataFrame = field(default_factory=lambda: pd.DataFrame())


def torchft_missing() -> str | None:
    """None where torchft runs here, else a sentence saying why and where it does.

    torchft ships wheels for Linux on x86-64 only (Python 3.11 to 3.13).
    """
    import importlib.util
    import platform

    if importlib.util.find_spec("torchft") is not None:
        lighthouse = os.path.join(os.path.dirname(sys.executable), "torchft_lighthouse")
        if os.path.exists(lighthouse):
            return None
        return f"torchft is installed but its lighthouse is not at {lighthouse}"
    where = f"{platform.system()} on {platform.machine()}"
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return (
            f"torchft has no wheel for {where}; run this lab on Colab or on a "
            "Linux x86-64 machine (pip install torchft==0.2.0)"
        )
    return (
        "torchft is not installed here: run %pip install torchft==0.2.0 in a "
        "cell (on Colab too), then run this cell again"
    )


def read_logs(paths: dict) -> pd.DataFrame:
    """The JSON lines of ``{(replica_id, life): path}`` as one table."""
    rows = []
    for (rid, life), path in paths.items():
        if not Path(path).exists():
            continue
        for line in Path(path).read_text().splitlines():
            if line.strip():
                rows.append({**json.loads(line), "life": life, "replica_id": str(rid)})
    df = pd.DataFrame(rows, columns=LOG_COLUMNS)
    return df.sort_values(["time", "replica_id"]).reset_index(drop=True)


def _last_step(path: Path) -> int:
    if not path.exists():
        return 0
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    try:
        return json.loads(lines[-1])["step"] if lines else 0
    except json.JSONDecodeError:  # a line half written
        return json.loads(lines[-2])["step"] if len(lines) > 1 else 0


def _spawn(cmd, out_path: Path, env) -> subprocess.Popen:
    out = open(out_path, "w")
    try:
        return subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    finally:
        out.close()


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _listeners(procs: dict) -> dict:
    return {n: loopback.listening_addresses(p.pid) for n, p in procs.items()}


def _fail_if_dead(procs: dict, what: str, deadline: float, timeout_s: float) -> None:
    dead = {n: p.returncode for n, p in procs.items() if p.poll() not in (None, 0)}
    if dead:
        raise RuntimeError(f"while waiting for {what}, processes failed: {dead}")
    if time.monotonic() > deadline:
        raise TimeoutError(f"no {what} within {timeout_s:g} s")


def _wait_for(predicate, timeout_s: float, what: str, procs: dict) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        _fail_if_dead(procs, what, deadline, timeout_s)
        time.sleep(0.02)


def kill_and_heal(
    *,
    n_groups: int = 3,
    steps: int = 200,
    kill_at_step: int = 40,
    killed: int = 1,
    restart_after_s: float = 0.5,
    batch: int = 4,
    seed: int = 0,
    step_ms: float = 40.0,
    timeout_s: float = 90.0,
    workdir: str | None = None,
    kill_after_s=None,
) -> FaultRun:
    """Run, kill groups with SIGKILL, restart each, and wait for all to finish.

    Args:
        n_groups: replica groups, in [2, 8]; a commit needs a majority of them.
        steps: the step every group trains to, in [4, 100000].
        kill_at_step: with ``kill_after_s`` None, one group dies once it has
            committed this step, in [1, steps - 2].
        killed: the id of the (first) group to kill, in [0, n_groups - 1].
        restart_after_s: seconds between a kill and the restart, in [0, 60].
        batch, seed, step_ms: passed to every group.
        timeout_s: the whole run's limit, in (0, 3600].
        workdir: where logs go (a new temporary folder when None).
        kill_after_s: a failure schedule instead of ``kill_at_step``: seconds
            after every group's first commit, increasing, each in (0, 3600]. The
            victims take turns from ``killed`` on; a group is killed only once
            it has committed a step since its last restart (else the next one is).
    """
    n_groups = check_int("n_groups", n_groups, 2, 8)
    steps = check_int("steps", steps, 4, 100_000)
    kill_at_step = check_int("kill_at_step", kill_at_step, 1, steps - 2)
    killed = check_int("killed", killed, 0, n_groups - 1)
    restart_after_s = check_float("restart_after_s", restart_after_s, 0.0, 60.0)
    timeout_s = check_float("timeout_s", timeout_s, 0.0, 3600.0, low_inclusive=False)
    offsets = None if kill_after_s is None else check_schedule(kill_after_s)
    folder = Path(workdir or tempfile.mkdtemp(prefix="fault-tolerance-"))
    env = loopback.loopback_env(dict(os.environ))
    env.update(OMP_NUM_THREADS="1", RUST_LOG="warn", PYTHONUNBUFFERED="1")
    majority = n_groups // 2 + 1
    port = loopback.free_port()
    url = f"http://{loopback.LOOPBACK}:{port}"
    lighthouse = [
        os.path.join(os.path.dirname(sys.executable), "torchft_lighthouse"),
        "--bind", f"{loopback.LOOPBACK}:{port}", "--min_replicas", str(majority),
        "--join_timeout_ms", str(round(JOIN_TIMEOUT_S * 1000)),
        "--quorum_tick_ms", str(round(QUORUM_TICK_S * 1000)),
        "--heartbeat_timeout_ms", str(round(HEARTBEAT_TIMEOUT_S * 1000)),
    ]  # fmt: skip

    def group(rid: int, life: int):
        path = folder / f"replica{rid}_life{life}.jsonl"
        cmd = [
            sys.executable, "-m", "clusterlab.fault_tolerance.train",
            "--lighthouse", url, "--replica-id", str(rid), "--steps", str(steps),
            "--batch", str(batch), "--seed", str(seed), "--log", str(path),
            "--step-ms", str(step_ms), "--min-replicas", str(majority),
            "--max-seconds", str(timeout_s),
        ]  # fmt: skip
        paths[(str(rid), life)] = path
        name = f"replica{rid}" + ("", "_restarted")[min(life, 1)]
        name += str(life) if life > 1 else ""
        procs[name] = _spawn(cmd, folder / f"replica{rid}_life{life}.out", env)
        pids[name] = procs[name].pid
        lives[rid] = (life, name)

    procs: dict = {}
    pids: dict = {}
    paths: dict = {}
    lives: dict = {}  # replica id -> (its current life, its process name)
    listeners: dict = {}
    kills: list = []
    restarts: list = []  # (when, replica id), in order
    deadline = time.monotonic() + timeout_s
    left = lambda: max(0.1, deadline - time.monotonic())  # noqa: E731
    up = lambda rid: _last_step(paths[(str(rid), lives[rid][0])]) >= 1  # noqa: E731

    def kill(rid: int) -> None:
        life, name = lives[rid]
        if not kills:
            for n, a in _listeners(procs).items():
                listeners.setdefault(n, set()).update(a)
        procs[name].send_signal(signal.SIGKILL)
        kills.append({"replica_id": str(rid), "life": life, "time": time.time()})
        procs[name].wait(timeout=10)
        del procs[name]
        restarts.append((time.monotonic() + restart_after_s, rid))

    def due(index: int, t0: float) -> bool:
        if offsets is None:
            return up(killed) and _last_step(paths[(str(killed), 0)]) >= kill_at_step
        return time.monotonic() >= t0 + offsets[index]

    try:
        procs["lighthouse"] = _spawn(lighthouse, folder / "lighthouse.out", env)
        pids["lighthouse"] = procs["lighthouse"].pid
        for rid in range(n_groups):
            group(rid, 0)
        every_up = lambda: all(up(r) for r in range(n_groups))  # noqa: E731
        _wait_for(every_up, left(), "every group's first commit", procs)
        t0, n_kills = time.monotonic(), 1 if offsets is None else len(offsets)
        turn = killed
        while len(kills) < n_kills or restarts:
            _fail_if_dead(procs, "the failure schedule", deadline, timeout_s)
            if restarts and time.monotonic() >= restarts[0][0]:
                rid = restarts.pop(0)[1]
                group(rid, lives[rid][0] + 1)
                for k in kills:
                    if k["replica_id"] == str(rid) and "restart_time" not in k:
                        k["restart_time"] = time.time()
                        break
            if len(kills) < n_kills and due(len(kills), t0):
                order = [(turn + i) % n_groups for i in range(n_groups)]
                ready = [r for r in order if lives[r][1] in procs and up(r)]
                if ready:
                    kill(ready[0])
                    turn = ready[0] + 1
            time.sleep(0.01)
        groups = lambda: {n: p for n, p in procs.items() if n != "lighthouse"}  # noqa: E731

        def rejoined():
            if all(up(r) for r in range(n_groups)):
                return True
            if all(p.poll() == 0 for p in groups().values()):
                raise RuntimeError(
                    f"the survivors reached step {steps} before every killed "
                    "group rejoined: give the run more steps after the last kill"
                )
            return False

        _wait_for(rejoined, left(), "the restarted groups' first commits", procs)
        for n, a in _listeners(procs).items():
            listeners.setdefault(n, set()).update(a)
        _wait_for(
            lambda: all(p.poll() is not None for p in groups().values()),
            left(), "finish of every group", procs,
        )  # fmt: skip
        codes = {n: p.returncode for n, p in groups().items()}
    finally:
        for p in procs.values():
            _kill(p)
    log = read_logs(paths)
    for k in kills:
        mine = log[(log["replica_id"] == k["replica_id"]) & (log["life"] == k["life"])]
        k["step"] = int(mine["step"].max()) if len(mine) else 0
    first = kills[0]
    return FaultRun(
        log=log,
        killed=first["replica_id"],
        kill_time=first["time"],
        restart_time=first["restart_time"],
        kill_step=first["step"],
        steps=steps,
        listeners={n: sorted(a) for n, a in listeners.items()},
        exit_codes=codes,
        pids=pids,
        kills=pd.DataFrame(kills, columns=KILL_COLUMNS),
    )


def check_schedule(kill_after_s) -> list[float]:
    """A failure schedule checked: increasing seconds, each in (0, 3600]."""
    try:
        offsets = [float(t) for t in kill_after_s]
    except (TypeError, ValueError):
        raise ValueError(
            f"kill_after_s={kill_after_s!r} must be a list of seconds"
        ) from None
    if not offsets or len(offsets) > 100:
        raise ValueError(f"kill_after_s={kill_after_s!r}: allowed 1 to 100 times")
    for i, t in enumerate(offsets):
        check_float(f"kill_after_s[{i}]", t, 0.0, 3600.0, low_inclusive=False)
    if any(b <= a for a, b in zip(offsets, offsets[1:], strict=False)):
        raise ValueError(f"kill_after_s={offsets!r} must be increasing")
    return offsets


def throughput(log: pd.DataFrame, start: float, end: float) -> float:
    """Steps committed per second between two moments (by any group)."""
    if end <= start:
        return float("nan")
    first = log.groupby("step")["time"].min()
    inside = first[(first > start) & (first <= end)]
    return len(inside) / (end - start)


def back_after_kill(
    log: pd.DataFrame, killed: str, kill_time: float, last_step: int | None = None
) -> pd.Series:
    """The survivors' first commit after a kill, in a quorum without the victim.

    A survivor's commit logged just after the kill can belong to a step the
    quorum finished with the victim, before it died. ``last_step``, the last
    step the victim committed, where given, rules out every commit of that
    step or an earlier one. Of the rest, the first commit with fewer
    participants than the last one before the kill is the survivors' own; if
    none has fewer (a restarted group took the victim's place in the same
    quorum, or no smaller quorum is in sight), the first commit of another
    group after the kill.
    """
    before = log.loc[log["time"] <= kill_time, "participants"]
    others = log[(log["replica_id"] != str(killed)) & (log["time"] > kill_time)]
    if last_step is not None:
        others = others[others["step"] > int(last_step)]
    others = others.sort_values("time")
    if len(before):
        smaller = others[others["participants"] < int(before.iloc[-1])]
        if len(smaller):
            return smaller.iloc[0]
    return others.iloc[0]


def recovery_summary(run: FaultRun) -> dict:
    """The figures of a run: recovery time, steps lost, throughput, the heal.

    Returns:
        ``kill_step``; ``recovery_s`` (the kill to the survivors' next commit);
        ``steps_committed_twice`` (by one group); ``uncommitted_steps`` (steps of
        1..N no group committed); ``steps_per_s_before``, ``_during`` and
        ``_after`` (before the kill, until the restarted group's first commit,
        after it); ``rejoin_step`` and ``healed_from`` of the restarted group.
    """
    log = run.log
    k = run.killed
    first_back = back_after_kill(log, k, run.kill_time, run.kill_step)
    back = log[(log["replica_id"] == k) & (log["life"] == 1)].sort_values("time")
    rejoin = back.iloc[0]
    full = log[log["participants"] == log["participants"].max()]
    start = float(full["time"].min())
    per_group = log.groupby(["replica_id", "life"])["step"]
    return {
        "kill_step": run.kill_step,
        "recovery_s": float(first_back["time"] - run.kill_time),
        "steps_committed_twice": int((per_group.count() - per_group.nunique()).sum()),
        "uncommitted_steps": len(set(range(1, run.steps + 1)) - set(log["step"])),
        "steps_per_s_before": throughput(log, start, run.kill_time),
        "steps_per_s_during": throughput(log, run.kill_time, float(rejoin["time"])),
        "steps_per_s_after": throughput(
            log, float(rejoin["time"]), float(log["time"].max())
        ),
        "rejoin_step": int(rejoin["step"]),
        "healed_from": rejoin["healed_from"],
        "participants_during": int(first_back["participants"]),
    }


def kill_and_heal_retried(*, tries: int = 2, say=print, **kwargs) -> FaultRun:
    """``kill_and_heal``, run once more when a restarted group could not rejoin.

    On two shared cores a restarted group can miss its chance: the mesh of the
    quorum it joins times out when the schedule's next victim is a member of
    it, and the survivors finish their steps before it asks again (one run in
    eight on 2026-12-04). Such a run measures no recovery, so the schedule is
    run again, said in words; any other failure, and the last try's, is raised.

    Args:
        tries: runs at most, in [1, 3].
        say: where the sentence about a repeated run goes.
        **kwargs: passed to ``kill_and_heal``.
    """
    tries = check_int("tries", tries, 1, 3)
    for attempt in range(1, tries + 1):
        try:
            return kill_and_heal(**kwargs)
        except RuntimeError as err:
            text = str(err)
            missed = "restarted groups' first commits" in text or (
                "before every killed group rejoined" in text
            )
            if attempt == tries or not missed:
                raise
            say(
                f"try {attempt} of {tries}: a restarted group could not rejoin "
                f"before the survivors finished ({text[:200]}); running the "
                "schedule again"
            )
    raise AssertionError("unreachable")  # the loop returns or raises


__all__ = [
    "KILL_COLUMNS",
    "FaultRun",
    "back_after_kill",
    "check_schedule",
    "kill_and_heal",
    "kill_and_heal_retried",
    "read_logs",
    "recovery_summary",
    "throughput",
    "torchft_missing",
]
