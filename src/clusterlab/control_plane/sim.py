"""Cluster scheduling: gang against greedy allocation, backfill, topology.

A training job of ``n`` GPUs can run only when it holds all ``n``: its ranks
meet at a rendezvous and then all-reduce. A scheduler that hands out GPUs one
rank at a time (as a per-pod scheduler does when two jobs' pods interleave)
can leave two jobs each holding part of what they need, waiting on each other
for ever while their GPUs sit idle: ``policy="greedy"``. Gang scheduling
(SLURM's allocations, Kubernetes' coscheduling and Volcano) gives a job all of
its GPUs at once or none: ``policy="gang"``, first come first served. Strict
order leaves GPUs idle in front of a large job; EASY backfill lets a later,
smaller job jump ahead when it ends before the first job's reserved start:
``policy="backfill"`` (it needs each job's run time, as SLURM's ``--time``).
``placement="topology"`` keeps a job under one switch when it fits there
(best fit), or on as few switches as possible; ``"any"`` takes the
lowest-numbered free GPUs.

It is a SimPy model: each job arrives and runs as a process, and the scheduler
makes a pass at every arrival and every end::

    jobs = [Job("a", 0.0, 6, 10.0), Job("b", 0.0, 6, 10.0)]
    simulate(jobs, SchedulerParams(1, 8, policy="greedy"))   # a deadlock
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import simpy

from clusterlab.core.validate import check_choice, check_float, check_int

POLICIES = ("greedy", "gang", "backfill")


PLACEMENTS = ("any", "topology")


COLUMNS = [
    "job", "policy", "placement", "n_gpus", "arrival_s", "runtime_s", "start_s",
    "end_s", "wait_s", "switches", "held_idle_gpu_s", "deadlocked",
]  # fmt: skip


@dataclass(frozen=True)
class Job:
    """One job: its name, arrival time (s), GPUs wanted and run time (s)."""

    name: str
    arrival_s: float
    n_gpus: int
    runtime_s: float


@dataclass(frozen=True)
class SchedulerParams:
    """A cluster of ``n_switches`` leaf switches, ``gpus_per_switch`` GPUs each.

    Args:
        n_switches: leaf switches, in [1, 1024].
        gpus_per_switch: GPUs under each switch, in [1, 4096].
        policy: ``"greedy"``, ``"gang"`` or ``"backfill"``.
        placement: ``"any"`` or ``"topology"``.
    """

    n_switches: int = 2
    gpus_per_switch: int = 8
    policy: str = "gang"
    placement: str = "any"

    def __post_init__(self):
        check_int("n_switches", self.n_switches, 1, 1024)
        check_int("gpus_per_switch", self.gpus_per_switch, 1, 4096)
        check_choice("policy", self.policy, POLICIES)
        check_choice("placement", self.placement, PLACEMENTS)

    @property
    def total_gpus(self) -> int:
        """GPUs in the cluster."""
        return self.n_switches * self.gpus_per_switch


def _check_jobs(jobs, total: int) -> list[Job]:
    jobs = list(jobs)
    if not jobs:
        raise ValueError("jobs=[] must hold at least one Job")
    for j in jobs:
        if not isinstance(j, Job):
            raise ValueError(f"jobs holds {j!r}, not a Job")
        check_int(f"n_gpus of job {j.name!r}", j.n_gpus, 1, total)
        check_float(f"arrival_s of job {j.name!r}", j.arrival_s, 0.0, 1e9)
        what = f"runtime_s of job {j.name!r}"
        check_float(what, j.runtime_s, 0.0, 1e9, low_inclusive=False)
    if len({j.name for j in jobs}) != len(jobs):
        raise ValueError("jobs must have different names")
    return sorted(jobs, key=lambda j: j.arrival_s)


def place(free: set, n: int, p: SchedulerParams) -> list[int] | None:
    """Choose ``n`` of the ``free`` GPUs (indices), or None if too few are free.

    ``"any"``: the lowest-numbered. ``"topology"``: under one switch if one has
    ``n`` free (the one with the fewest free that fits: best fit), else the
    switches with the most free GPUs first, so that the job spans as few as
    possible.
    """
    if len(free) < n:
        return None
    if p.placement == "any":
        return sorted(free)[:n]
    by_switch: dict[int, list[int]] = {}
    for g in sorted(free):
        by_switch.setdefault(g // p.gpus_per_switch, []).append(g)
    fits = [s for s, gs in by_switch.items() if len(gs) >= n]
    if fits:
        best = min(fits, key=lambda s: (len(by_switch[s]), s))
        return by_switch[best][:n]
    chosen: list[int] = []
    for s in sorted(by_switch, key=lambda s: (-len(by_switch[s]), s)):
        chosen += by_switch[s][: n - len(chosen)]
        if len(chosen) == n:
            break
    return chosen


class _Cluster:
    def __init__(self, env: simpy.Environment, p: SchedulerParams):
        self.env, self.p = env, p
        self.free = set(range(p.total_gpus))
        self.queue: list[dict] = []  # waiting jobs, in arrival order
        self.running: list[dict] = []
        self.rows: list[dict] = []

    def arrive(self, job: Job):
        yield self.env.timeout(job.arrival_s)
        self.queue.append({"job": job, "held": {}, "start": None})
        self.env.process(self.schedule())

    def run(self, w: dict):
        self.running.append(w)
        yield self.env.timeout(w["job"].runtime_s)
        self.running.remove(w)
        self.free |= set(w["gpus"])
        self._record(w, self.env.now)
        self.env.process(self.schedule())

    def _start(self, w: dict, gpus: list[int]) -> None:
        self.free -= set(gpus)
        w["gpus"], w["start"] = sorted(set(gpus) | set(w["held"])), self.env.now
        w["end_planned"] = self.env.now + w["job"].runtime_s
        self.queue.remove(w)
        self.env.process(self.run(w))

    def schedule(self):
        # A pass after everything else due now: jobs that arrive together are
        # all in the queue (and GPUs freed together all free) when it runs.
        yield self.env.timeout(0)
        {"greedy": self._greedy, "gang": self._gang, "backfill": self._backfill}[
            self.p.policy
        ]()

    def _greedy(self) -> None:
        # One GPU at a time to each waiting job in turn, as pods of jobs that
        # arrived together interleave in a per-pod queue; a job starts once
        # it holds all its GPUs, and never gives back a partial allocation.
        while self.free:
            hungry = [w for w in self.queue if len(w["held"]) < w["job"].n_gpus]
            if not hungry:
                break
            for w in hungry:
                if not self.free:
                    break
                g = min(self.free)
                self.free.discard(g)
                w["held"][g] = self.env.now
        for w in list(self.queue):
            if len(w["held"]) == w["job"].n_gpus:
                self._start(w, [])

    def _gang(self) -> None:
        while self.queue:  # first come, first served: the head blocks the rest
            w = self.queue[0]
            gpus = place(self.free, w["job"].n_gpus, self.p)
            if gpus is None:
                return
            self._start(w, gpus)

    def _backfill(self) -> None:
        self._gang()
        if not self.queue:
            return
        head = self.queue[0]
        # The head's reserved start: when enough running jobs will have ended.
        ends = sorted((r["end_planned"], len(r["gpus"])) for r in self.running)
        have, shadow, spare = len(self.free), math.inf, 0
        for t, n in ends:
            have += n
            if have >= head["job"].n_gpus:
                shadow, spare = t, have - head["job"].n_gpus
                break
        for w in list(self.queue[1:]):
            n = w["job"].n_gpus
            ends_in_time = self.env.now + w["job"].runtime_s <= shadow
            if n <= len(self.free) and (ends_in_time or n <= spare):
                if not ends_in_time:
                    spare -= n  # it runs past the reservation: GPUs the head leaves
                self._start(w, place(self.free, n, self.p))

    def _record(self, w: dict, end) -> None:
        job, start = w["job"], w["start"]
        gpus = w.get("gpus", list(w["held"]))
        stop = start if start is not None else end
        held = sum(stop - t for t in w["held"].values())
        self.rows.append(
            {
                "job": job.name,
                "policy": self.p.policy,
                "placement": self.p.placement,
                "n_gpus": job.n_gpus,
                "arrival_s": job.arrival_s,
                "runtime_s": job.runtime_s,
                "start_s": math.nan if start is None else start,
                "end_s": math.nan if start is None else end,
                "wait_s": (math.inf if start is None else start - job.arrival_s),
                "switches": len({g // self.p.gpus_per_switch for g in gpus}),
                "held_idle_gpu_s": held,
                "deadlocked": start is None,
            }
        )


def simulate(jobs, params: SchedulerParams, horizon_s: float | None = None):
    """Run the jobs through the scheduler; one row per job.

    Args:
        jobs: ``Job`` objects (any order; names different).
        params: the cluster and the policy.
        horizon_s: when a job still waiting is declared deadlocked; None: once
            nothing is left to happen (every job has arrived, none runs).

    Returns:
        A DataFrame with ``COLUMNS``: ``start_s``/``end_s`` NaN and ``wait_s``
        infinite for a job that never started (``deadlocked``);
        ``held_idle_gpu_s`` is GPU-seconds it held before it started (up to
        the end for a deadlocked job); ``switches`` is how many leaf switches
        its GPUs span.
    """
    if not isinstance(params, SchedulerParams):
        raise ValueError(f"params={params!r} must be a SchedulerParams")
    jobs = _check_jobs(jobs, params.total_gpus)
    env = simpy.Environment()
    cluster = _Cluster(env, params)
    for job in jobs:
        env.process(cluster.arrive(job))
    env.run(until=horizon_s)
    for w in list(cluster.queue):
        cluster._record(w, env.now)
    order = {j.name: i for i, j in enumerate(jobs)}
    table = pd.DataFrame(cluster.rows, columns=COLUMNS)
    return table.sort_values("job", key=lambda s: s.map(order)).reset_index(drop=True)


def summarize(table: pd.DataFrame, total_gpus: int) -> dict:
    """Makespan (s), mean wait (s), busy share of GPU time, idle-held GPU-s.

    ``busy_share`` is GPU-seconds of running jobs over ``total_gpus`` times the
    makespan (from the first arrival to the last end); with a deadlock the
    makespan is infinite and the share NaN.
    """
    check_int("total_gpus", total_gpus, 1, 10**7)
    ran = table[~table["deadlocked"]]
    if table["deadlocked"].any():
        makespan = math.inf
    else:
        makespan = float(ran["end_s"].max() - table["arrival_s"].min())
    work = float((ran["n_gpus"] * ran["runtime_s"]).sum())
    share = work / (total_gpus * makespan) if math.isfinite(makespan) else math.nan
    return {
        "makespan_s": makespan,
        "mean_wait_s": float(table["wait_s"].mean()),
        "busy_share": share,
        "held_idle_gpu_s": float(table["held_idle_gpu_s"].sum()),
        "deadlocked_jobs": int(table["deadlocked"].sum()),
        "multi_switch_jobs": int((ran["switches"] > 1).sum()),
    }


def random_jobs(n_jobs: int, total_gpus: int, seed: int = 0) -> list[Job]:
    """A workload: sizes powers of two up to half the cluster, lognormal times.

    Args:
        n_jobs: jobs, in [1, 10000].
        total_gpus: the cluster's GPUs, in [2, 10**6]; no job asks for more
            than half of them.
        seed: for NumPy's generator.

    Returns:
        ``Job`` objects ``j0, j1, ...``, arriving as a Poisson stream, 1 s apart
        on average; run times with median 20 s.
    """
    check_int("n_jobs", n_jobs, 1, 10_000)
    check_int("total_gpus", total_gpus, 2, 10**6)
    rng = np.random.default_rng(seed)
    sizes = 2 ** np.arange(int(np.log2(total_gpus // 2)) + 1)
    n = rng.choice(sizes, n_jobs)
    arrival = np.cumsum(rng.exponential(1.0, n_jobs)) - 1.0
    runtime = rng.lognormal(np.log(20.0), 0.8, n_jobs)
    return [
        Job(f"j{i}", round(max(a, 0.0), 3), int(g), round(float(r), 3))
        for i, (a, g, r) in enumerate(zip(arrival, n, runtime, strict=True))
    ]


def compare_policies(jobs, n_switches: int = 2, gpus_per_switch: int = 8):
    """``summarize`` for every policy and placement on the same jobs: a table."""
    rows = []
    for policy in POLICIES:
        for placement in PLACEMENTS:
            p = SchedulerParams(n_switches, gpus_per_switch, policy, placement)
            rows.append(
                {"policy": policy, "placement": placement}
                | summarize(simulate(jobs, p), p.total_gpus)
            )
    return pd.DataFrame(rows)
