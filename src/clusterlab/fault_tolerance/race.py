"""One failure schedule, run twice: per-step recovery and checkpoint-restart.

``checkpoint_restart_run`` starts the failures chapter's training job
(``clusterlab.failures.resume``) under ``torchrun --max-restarts``, the launcher's
restart path: it checkpoints every ``every`` steps, and at each moment of the
schedule one rank gets SIGKILL; the agent tears the group down, starts it again,
and the ranks resume from the last checkpoint. ``kill_and_heal`` with
``kill_after_s`` runs the same schedule under torchft (``cl.fault_tolerance.measure``).

``restart_costs`` and ``per_step_costs`` read each run's logs: the step time,
what each failure cost (the restart and the steps done again; the stall and the
time until the failed group trained again) and the measured goodput, the work
kept over the work a run without failures would have done in the same time.
``predict`` sets each against its replay (``cl.fault_tolerance.sim``), with a
band from the run's own noise: the spread of the measured restarts, one step
per event, and how much the step time drifted over the run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from clusterlab.core.torchrun import kill_session, torchrun_command, torchrun_env
from clusterlab.core.validate import check_float, check_int
from clusterlab.fault_tolerance.measure import FaultRun, back_after_kill, check_schedule
from clusterlab.fault_tolerance.sim import replay_checkpoint_restart, replay_per_step


@dataclass
class RestartRun:
    """What ``checkpoint_restart_run`` saw.

    Attributes:
        steps: rank 0's steps, ``attempt, step, time`` (``time.time()`` after it).
        checkpoints: ``attempt, step, seconds`` of each checkpoint written.
        kills: ``attempt, pid, time`` of each SIGKILL.
        n_steps, every, nproc: the job.
        exit_code: torchrun's return code (0: every step done).
        folder: where the checkpoints and logs are.
    """

    steps: pd.DataFrame
    checkpoints: pd.DataFrame
    kills: pd.DataFrame
    n_steps: int
    every: int
    nproc: int
    exit_code: int | None
    folder: str = ""
    output: str = field(default="", repr=False)


def checkpoint_restart_run(
    kill_after_s,
    *,
    nproc: int = 3,
    steps: int = 300,
    every: int = 10,
    step_ms: float = 25.0,
    timeout_s: float = 120.0,
    workdir: str | None = None,
) -> RestartRun:
    """Run the job under torchrun and SIGKILL one rank at each scheduled moment.

    Args:
        kill_after_s: seconds after the first step, increasing (as for
            ``kill_and_heal``); a moment that falls in a restart kills the new
            attempt's last rank as soon as it is up.
        nproc: ranks (data-parallel replicas), in [2, 8].
        steps: steps of the job, in [4, 100000].
        every: checkpoint interval, steps, in [1, steps].
        step_ms: extra work per step, ms, in [0, 10000].
        timeout_s: the whole run's limit, in (0, 3600].
        workdir: the checkpoint folder (a new temporary one when None).
    """
    from clusterlab.failures import resume

    offsets = check_schedule(kill_after_s)
    nproc = check_int("nproc", nproc, 2, 8)
    steps = check_int("steps", steps, 4, 100_000)
    every = check_int("every", every, 1, steps)
    step_ms = check_float("step_ms", step_ms, 0.0, 10_000.0)
    timeout_s = check_float("timeout_s", timeout_s, 0.0, 3600.0, low_inclusive=False)
    folder = Path(workdir or tempfile.mkdtemp(prefix="checkpoint-restart-"))
    args = ["--steps", steps, "--every", every, "--step-ms", step_ms, "--dir", folder]
    cmd = torchrun_command(
        "clusterlab.failures.resume", nproc, *map(str, args), max_restarts=len(offsets)
    )
    out_path = folder / "torchrun.out"
    deadline = time.monotonic() + timeout_s
    kills = []

    def wait(predicate, what):
        while not predicate():
            if proc.poll() is not None:
                raise RuntimeError(
                    f"torchrun ended (code {proc.returncode}) while waiting for "
                    f"{what}:\n{out_path.read_text()[-2000:]}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what} within {timeout_s:g} s")
            time.sleep(0.005)

    with open(out_path, "w") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=torchrun_env(),
            start_new_session=True,
        )  # fmt: skip
    try:
        wait(lambda: resume.read_step_times(str(folder))[0], "the first step")
        t0 = time.monotonic()
        for attempt, offset in enumerate(offsets):
            due = t0 + offset
            wait(lambda due=due: time.monotonic() >= due, "the next failure")
            pid = partial(resume.worker_pid, str(folder), attempt, nproc - 1)
            wait(lambda pid=pid: pid() is not None, f"attempt {attempt}'s ranks")
            os.kill(pid(), signal.SIGKILL)
            kills.append((attempt, pid(), time.time()))
        proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"torchrun did not finish within {timeout_s:g} s") from None
    finally:
        kill_session(proc)
        proc.wait()
    step_rows, ckpt_rows = resume.read_step_times(str(folder))
    return RestartRun(
        steps=pd.DataFrame(step_rows, columns=["attempt", "step", "time"]),
        checkpoints=pd.DataFrame(ckpt_rows, columns=["attempt", "step", "seconds"]),
        kills=pd.DataFrame(kills, columns=["attempt", "pid", "time"]),
        n_steps=steps,
        every=every,
        nproc=nproc,
        exit_code=proc.returncode,
        folder=str(folder),
        output=out_path.read_text(),
    )


def _drift(durations: np.ndarray) -> float:
    """How much the median step time moved between the run's two halves."""
    half = len(durations) // 2
    if half < 3:
        return 0.0
    a, b = np.median(durations[:half]), np.median(durations[half:])
    return float(abs(a - b) / np.median(durations))


def restart_costs(run: RestartRun) -> dict:
    """The checkpoint-restart run's step time, failures' costs and goodput.

    Returns:
        ``step_s`` (the mean within an attempt, checkpoints left out: the wall
        time is a sum, so the mean), ``step_times_s`` (each completed step's
        seconds in the order the run did them, its checkpoint taken out),
        ``checkpoint_s`` (mean),
        ``restart_s`` (per whole restart: the kill to the first step's start
        after it; a restart the next failure cut short is left out),
        ``restart_at_failure_s`` (the same, one per failure in order, NaN for
        a restart cut short),
        ``lost_steps`` (per failure), ``begin``, ``end`` (``time.time()``
        of the first step's start and the last step's end), ``window_s``,
        ``fail_at_s`` (the kills, seconds after ``begin``), ``drift`` and
        ``goodput`` (``n_steps * step_s / window_s``).
    """
    s = run.steps.sort_values("time")
    if run.exit_code != 0 or s.empty or s["step"].max() != run.n_steps - 1:
        raise RuntimeError(
            f"the checkpoint-restart run did not finish (code {run.exit_code}):\n"
            f"{run.output[-2000:]}"
        )
    gaps = s.groupby("attempt")["time"].diff()
    # a step whose predecessor wrote a checkpoint took that checkpoint too
    plain = gaps[(s["step"] % run.every != 0) & gaps.notna()].to_numpy()
    step_s = float(np.mean(plain))
    # each completed step's own time, in the order the run completed them: a
    # checkpoint's seconds taken out of the step after it; an attempt's first
    # step is timed by step_s, the rest of it being the restart
    written = {(int(a), int(k)): float(sec) for a, k, sec in run.checkpoints.to_numpy()}
    own = [
        step_s if np.isnan(gap) else gap - written.get((int(a), int(k)), 0.0)
        for a, k, gap in zip(s["attempt"], s["step"], gaps, strict=True)
    ]
    begin, end = float(s["time"].iloc[0]) - step_s, float(s["time"].iloc[-1])
    restart, lost, at_failure = [], [], []
    stepped = sorted(set(s["attempt"]))
    for attempt, kill_time in zip(run.kills["attempt"], run.kills["time"], strict=True):
        before = s[s["attempt"] == attempt]
        after = s[s["attempt"] == attempt + 1]
        if len(after):  # a whole restart: the kill to the next attempt's first step
            restart.append(float(after["time"].iloc[0]) - step_s - kill_time)
            at_failure.append(restart[-1])
        else:  # a kill during the restart cut it short: its length is not known
            at_failure.append(float("nan"))
        later = [a for a in stepped if a > attempt]
        resumed = int(s.loc[s["attempt"] == later[0], "step"].iloc[0])
        lost.append(int((before["step"] >= resumed).sum()))
    if not restart:
        raise RuntimeError(
            "every restart of the checkpoint-restart run was cut short by the next "
            "failure: give the schedule longer gaps than a restart"
        )
    return {
        "step_s": step_s,
        "step_times_s": own,
        "checkpoint_s": float(run.checkpoints["seconds"].mean()),
        "restart_s": restart,
        "restart_at_failure_s": at_failure,
        "lost_steps": lost,
        "begin": begin,
        "end": end,
        "window_s": end - begin,
        "fail_at_s": [float(t) - begin for t in run.kills["time"]],
        "drift": _drift(plain),
        "goodput": run.n_steps * step_s / (end - begin),
    }


def per_step_costs(run: FaultRun, n_groups: int) -> dict:
    """The per-step run's step time, failures' costs and goodput.

    The window runs from the moment every group had committed once to the last
    commit. Goodput is the samples the quorum trained in it over what
    ``n_groups`` groups train at the full quorum's step time.

    Returns:
        ``step_s`` (the mean at the full quorum, the step in flight at each
        kill left out: it waited out the stall), ``recovery_s`` and
        ``rejoin_s`` (per failure: the kill to the survivors' next commit, and
        to the first step the failed group trained again), ``begin``, ``end``,
        ``window_s``, ``fail_at_s``, ``drift``, ``batch``, ``relative_rate``
        (``{groups away: throughput over the full quorum's}``, measured where
        the run held that quorum for five steps or more) and ``goodput``.
    """
    n_groups = check_int("n_groups", n_groups, 2, 8)
    log = run.log
    batch = int(log.loc[log["samples"].map(len) > 0, "samples"].map(len).iloc[0])
    first = log.sort_values("time").groupby("step").first()
    full = first["participants"] == n_groups
    gaps = first["time"].diff()
    # the step in flight at a kill waited out the stall: its gap is no step time
    # (when the victim is back by the stall's end it even joins a full quorum)
    times = first["time"].to_numpy()
    hit = np.searchsorted(times, run.kills["time"].to_numpy())
    in_flight = np.zeros(len(times), bool)
    in_flight[hit[hit < len(times)]] = True
    consecutive = full & full.shift(1, fill_value=False) & ~in_flight
    durations = gaps[consecutive].dropna().to_numpy()
    step_s = float(np.mean(durations))
    # each quorum size's own step time (fewer groups step faster on shared cores)
    trained = first["step_samples"].map(len)
    relative = {}
    for groups in range(1, n_groups):
        same = (trained == groups * batch) & (trained.shift(1) == groups * batch)
        same &= (gaps < 3 * step_s) & ~in_flight  # not across a stall
        if same.sum() >= 5:
            ratio = step_s / float(gaps[same].mean())
            relative[n_groups - groups] = groups / n_groups * ratio
    begin = float(log[log["life"] == 0].groupby("replica_id")["time"].min().max())
    end = float(log["time"].max())
    inside = first[first["time"] > begin]
    samples = int(inside["step_samples"].map(len).sum())
    recovery, rejoin = [], []
    for k in run.kills.itertuples():
        back_at = back_after_kill(log, k.replica_id, k.time, k.step)
        recovery.append(float(back_at["time"]) - k.time)
        back = log[
            (log["replica_id"] == k.replica_id)
            & (log["life"] == k.life + 1)
            & (log["samples"].map(len) > 0)
        ]
        if len(back):
            rejoin.append(float(back["time"].min()) - step_s - k.time)
        else:  # killed again before it trained: out until that kill
            again = run.kills[
                (run.kills["replica_id"] == k.replica_id)
                & (run.kills["life"] == k.life + 1)
            ]
            rejoin.append(float(again["time"].iloc[0]) - k.time)
    ideal = n_groups * batch * (end - begin) / step_s
    return {
        "step_s": step_s,
        "recovery_s": recovery,
        "rejoin_s": rejoin,
        "begin": begin,
        "end": end,
        "window_s": end - begin,
        "fail_at_s": [float(t) - begin for t in run.kills["time"]],
        "drift": _drift(durations),
        "batch": batch,
        "relative_rate": relative,
        "goodput": samples / ideal,
    }


def predict_restart(costs: dict, run: RestartRun) -> dict:
    """The replay's goodput for the measured schedule, with its noise band.

    The replay takes the schedule as measured, the steps' own times in the
    order the run did them, the mean checkpoint, and each failure's own
    restart; a restart the next failure cut short lasted until that failure.
    Together they set where each failure finds the job: a restart half a
    second longer than the mean moves the next failure some 15 steps at 30 ms
    a step, a good part of a checkpoint interval, so a replay at the mean
    restart can lose a different number of steps than the run did. The band
    is one step per failure (where a failure lands within a step) and the
    step time's drift between the run's halves.
    """
    fails = costs["fail_at_s"]
    restarts = [
        (fails[k + 1] - fails[k]) if np.isnan(r) and k + 1 < len(fails) else r
        for k, r in enumerate(costs["restart_at_failure_s"])
    ]
    restarts = [
        float(np.mean(costs["restart_s"])) if np.isnan(r) else r for r in restarts
    ]
    goodput = replay_checkpoint_restart(
        fails, steps=run.n_steps, step_s=costs["step_s"], every=run.every,
        checkpoint_s=costs["checkpoint_s"], restart_s=restarts,
        step_times_s=costs["step_times_s"],
    )["goodput"]  # fmt: skip
    slack = (len(fails) + 1) * costs["step_s"] / costs["window_s"] + costs["drift"]
    return {"goodput": goodput, "low": goodput - slack, "high": goodput + slack}


def predict_per_step(costs: dict, n_groups: int) -> dict:
    """The per-step replay's goodput for the measured failures, with its band.

    The band takes every failure at the shortest and at the longest stall and
    rejoin seen, widened by one step per failure and by the step time's drift.
    """
    rec, rej = costs["recovery_s"], costs["rejoin_s"]
    n = len(rec)
    replay = lambda a, r: replay_per_step(  # noqa: E731
        costs["fail_at_s"], a, r, window_s=costs["window_s"], n_groups=n_groups,
        relative_rate=costs.get("relative_rate"),
    )["goodput"]  # fmt: skip
    slack = (n + 1) * costs["step_s"] / costs["window_s"] + costs["drift"]
    return {
        "goodput": replay(rec, rej),
        "low": replay([max(rec)] * n, [max(rej)] * n) - slack,
        "high": replay([min(rec)] * n, [min(rej)] * n) + slack,
    }


@dataclass
class Race:
    """Both runs of one schedule, what each cost, and each replay's prediction."""

    schedule: list
    n_groups: int
    restart_run: RestartRun
    per_step_run: FaultRun
    restart: dict
    per_step: dict
    restart_model: dict
    per_step_model: dict


def run_race(
    schedule,
    *,
    n_groups: int = 3,
    steps: int = 330,
    every: int = 10,
    step_ms: float = 25.0,
    timeout_s: float = 150.0,
    progress: bool = True,
) -> Race:
    """Run ``schedule`` under torchrun's restarts, then under torchft; compare.

    Both jobs have ``n_groups`` data-parallel replicas, ``steps`` steps of
    ``step_ms`` extra work, and the failure moments of ``schedule`` (seconds
    after their first step). The checkpoint-restart job saves every ``every``
    steps. ``timeout_s`` bounds each run.
    """
    from clusterlab.fault_tolerance.measure import kill_and_heal

    say = print if progress else (lambda *a, **k: None)
    say(f"checkpoint-restart: {n_groups} ranks under torchrun, {steps} steps ...")
    restart_run = checkpoint_restart_run(
        schedule, nproc=n_groups, steps=steps, every=every, step_ms=step_ms,
        timeout_s=timeout_s,
    )  # fmt: skip
    say(f"per-step recovery: {n_groups} torchft groups, {steps} steps ...")
    per_step_run = kill_and_heal(
        n_groups=n_groups, steps=steps, step_ms=step_ms, kill_after_s=schedule,
        timeout_s=timeout_s,
    )  # fmt: skip
    return compare(schedule, per_step_run, restart_run, n_groups)


def compare(schedule, per_step_run: FaultRun, restart_run: RestartRun,
            n_groups: int = 3) -> Race:  # fmt: skip
    """Both runs' costs and their replays' predictions, as one ``Race``."""
    restart = restart_costs(restart_run)
    per_step = per_step_costs(per_step_run, n_groups)
    return Race(
        schedule=list(schedule),
        n_groups=n_groups,
        restart_run=restart_run,
        per_step_run=per_step_run,
        restart=restart,
        per_step=per_step,
        restart_model=predict_restart(restart, restart_run),
        per_step_model=predict_per_step(per_step, n_groups),
    )


def race_table(race: Race) -> pd.DataFrame:
    """One row per job: failures, their mean cost, goodput measured and modelled.

    ``closed_form`` is the expected goodput at the run's own failure rate
    (``mtbf_s``: its length over its failures): Daly's exact form for
    checkpoint-restart (``daly``; ``first_order`` beside it) and
    ``per_step_goodput`` for per-step recovery.
    """
    from clusterlab.models.checkpointing import goodput, goodput_first_order
    from clusterlab.models.fault_tolerance import per_step_goodput

    r, p = race.restart, race.per_step
    tau = race.restart_run.every * r["step_s"]
    m_r = r["window_s"] / len(r["fail_at_s"])
    m_p = p["window_s"] / len(p["recovery_s"])
    rec, rej = float(np.mean(p["recovery_s"])), float(np.mean(p["rejoin_s"]))
    rows = [
        {
            "job": "checkpoint-restart",
            "failures": len(r["fail_at_s"]),
            "mtbf_s": m_r,
            "cost per failure": f"restart {np.mean(r['restart_s']):.2f} s, "
            f"{np.mean(r['lost_steps']):.1f} steps again",
            "measured": r["goodput"],
            **{k: race.restart_model[k] for k in ("goodput", "low", "high")},
            "closed_form": goodput(
                tau, r["checkpoint_s"], m_r, np.mean(r["restart_s"])
            ),
            "first_order": goodput_first_order(
                tau, r["checkpoint_s"], m_r, np.mean(r["restart_s"])
            ),
        },
        {
            "job": "per-step recovery",
            "failures": len(p["recovery_s"]),
            "mtbf_s": m_p,
            "cost per failure": f"stall {rec:.2f} s, one group out {rej:.2f} s",
            "measured": p["goodput"],
            **{k: race.per_step_model[k] for k in ("goodput", "low", "high")},
            "closed_form": per_step_goodput(m_p, rec, rej, race.n_groups),
            "first_order": per_step_goodput(m_p, rec, rej, race.n_groups),
        },
    ]
    return pd.DataFrame(rows).rename(columns={"goodput": "replay"})


__all__ = [
    "Race",
    "RestartRun",
    "race_table",
    "run_race",
    "checkpoint_restart_run",
    "compare",
    "per_step_costs",
    "predict_per_step",
    "predict_restart",
    "restart_costs",
]
