"""A training job on many parts that fail at random, with checkpoints and restarts.

The job needs all of its ``n_parts`` parts (GPUs with their share of hosts,
links and software). Each part fails after an exponential time of mean
``part_mtbf_s`` and is replaced at once. The job works in segments: compute for
``interval_s``, then write a checkpoint for ``checkpoint_cost_s``. A failure
anywhere loses the work since the last checkpoint and costs ``restart_s`` (a
failure during the restart starts it again). Nothing here knows the formula
``m / N`` or Young's interval: they come out of the simulation, and the tests
check them against ``cl.models.checkpointing``.

``simulate`` is the SimPy model of one job (every phase, in order);
``goodput_sweep`` is a vectorised NumPy engine for many intervals at once. How
the failures are detected in the first place is simulated in ``cl.failures.sim``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import simpy

from clusterlab.core.units import HOUR_S
from clusterlab.core.validate import check_choice, check_float, check_int
from clusterlab.models.checkpointing import goodput as model_goodput
from clusterlab.models.checkpointing import job_mtbf, young_daly_interval


@dataclass(frozen=True)
class JobParams:
    """One training job and how its parts fail.

    Attributes:
        work_s: seconds of useful work the job must finish (> 0).
        interval_s: seconds of work between checkpoints (> 0).
        checkpoint_cost_s: seconds to write a checkpoint (>= 0).
        restart_s: seconds from a failure until work resumes (>= 0).
        part_mtbf_s: mean time between failures of one part, seconds (> 0).
        n_parts: parts the job needs, in [1, 100000].
    """

    work_s: float = 48 * HOUR_S
    interval_s: float = 1800.0
    checkpoint_cost_s: float = 60.0
    restart_s: float = 300.0
    part_mtbf_s: float = 50_000 * HOUR_S
    n_parts: int = 1024

    def __post_init__(self):
        check_float("work_s", self.work_s, 0.0, 1e10, low_inclusive=False)
        check_float("interval_s", self.interval_s, 0.0, 1e9, low_inclusive=False)
        check_float("checkpoint_cost_s", self.checkpoint_cost_s, 0.0, 1e7)
        check_float("restart_s", self.restart_s, 0.0, 1e7)
        check_float("part_mtbf_s", self.part_mtbf_s, 0.0, 1e12, low_inclusive=False)
        check_int("n_parts", self.n_parts, 1, 100_000)

    @property
    def job_mtbf_s(self) -> float:
        """The job's mean time between failures (``models.checkpointing.job_mtbf``)."""
        return job_mtbf(self.part_mtbf_s, self.n_parts)


def simulate(params: JobParams, seed: int = 0) -> pd.DataFrame:
    """Run one job to completion; return its phases in order.

    Args:
        params: the job, its checkpoints and its parts.
        seed: seeds every failure time.

    Returns:
        One row per phase: ``start_s``, ``end_s``, ``phase`` (``work``,
        ``checkpoint``, ``restart``), ``kept`` (False for work or a checkpoint
        cut short or lost to a failure), ``failed_part`` (the part whose failure
        ended the phase, or -1) and ``saved_s`` (work saved at the phase's end).
    """
    check_int("seed", seed, 0)
    rng = np.random.default_rng(seed)
    p = params
    env = simpy.Environment()
    rows = []
    state = {"saved": 0.0, "pending": [], "failed": -1}

    def part(index):
        while True:
            yield env.timeout(rng.exponential(p.part_mtbf_s))
            if job.is_alive:  # a part that fails after the job ends is moot
                state["failed"] = index
                job.interrupt(index)

    def phase(name, seconds):
        """Run one phase; return True if it finished, False if a failure cut it."""
        start = env.now
        try:
            yield env.timeout(seconds)
        except simpy.Interrupt as stop:
            rows.append((start, env.now, name, False, stop.cause, state["saved"]))
            for row in state["pending"]:  # unsaved work is lost with the failure
                rows[row] = rows[row][:3] + (False,) + rows[row][4:]
            state["pending"] = []
            return False
        rows.append((start, env.now, name, True, -1, state["saved"]))
        return True

    def run_job():
        while state["saved"] < p.work_s - 1e-9:
            todo = min(p.interval_s, p.work_s - state["saved"])
            if not (yield from phase("work", todo)):
                while not (yield from phase("restart", p.restart_s)):
                    pass
                continue
            state["pending"].append(len(rows) - 1)
            if todo < p.interval_s:  # the last piece of work needs no checkpoint
                state["saved"] += todo
                rows[-1] = rows[-1][:5] + (state["saved"],)
                break
            if not (yield from phase("checkpoint", p.checkpoint_cost_s)):
                while not (yield from phase("restart", p.restart_s)):
                    pass
                continue
            state["saved"] += todo
            state["pending"] = []
            rows[-1] = rows[-1][:5] + (state["saved"],)

    job = env.process(run_job())
    for index in range(p.n_parts):
        env.process(part(index))
    env.run(until=job)
    return pd.DataFrame(
        rows, columns=["start_s", "end_s", "phase", "kept", "failed_part", "saved_s"]
    )


def job_summary(phases: pd.DataFrame) -> dict:
    """Wall time, failures, goodput and lost work from ``simulate``'s phases.

    Returns:
        ``wall_s``, ``work_s`` (useful work kept), ``failures``,
        ``goodput`` (``work_s / wall_s``), ``lost_work_s``, ``checkpoint_s`` and
        ``restart_s`` (seconds spent in each).
    """
    dur = phases["end_s"] - phases["start_s"]
    work = phases["phase"] == "work"
    wall_s = float(phases["end_s"].iloc[-1])
    kept_work = float(dur[work & phases["kept"]].sum())
    return {
        "wall_s": wall_s,
        "work_s": kept_work,
        "failures": int((phases["failed_part"] >= 0).sum()),
        "goodput": kept_work / wall_s,
        "lost_work_s": float(dur[work & ~phases["kept"]].sum()),
        "checkpoint_s": float(dur[phases["phase"] == "checkpoint"].sum()),
        "restart_s": float(dur[phases["phase"] == "restart"].sum()),
    }


#: How the times between the job's failures may be drawn.
DISTRIBUTIONS = ("exponential", "weibull")


def failure_gaps(mean_s: float, n: int, seed: int = 0, distribution="exponential",
                 shape: float = 1.0) -> np.ndarray:  # fmt: skip
    """``n`` times between failures of mean ``mean_s``.

    Args:
        mean_s: the mean gap, seconds (> 0): the job's MTBF.
        n: how many, in [1, 10**7].
        seed: seeds the draw.
        distribution: ``"exponential"`` (a Poisson process: the assumption of
            Young's and Daly's formulas) or ``"weibull"`` with ``shape`` k, of
            the same mean. k below 1 makes failures bunch: many short gaps and a
            few long ones, as field studies of large machines report.
        shape: the Weibull shape k, in [0.2, 5] (1 is the exponential).
    """
    check_choice("distribution", distribution, DISTRIBUTIONS)
    mean_s = check_float("mean_s", mean_s, 0.0, 1e12, low_inclusive=False)
    n = check_int("n", n, 1, 10**7)
    rng = np.random.default_rng(check_int("seed", seed, 0))
    if distribution == "exponential":
        return rng.exponential(mean_s, n)
    k = check_float("shape", shape, 0.2, 5.0)
    return mean_s * rng.weibull(k, n) / math.gamma(1.0 + 1.0 / k)


def goodput_sweep(
    params: JobParams,
    intervals_s,
    seed: int = 0,
    *,
    n_failures: int = 100_000,
    distribution: str = "exponential",
    shape: float = 1.0,
) -> pd.DataFrame:
    """Simulated goodput for many checkpoint intervals at once, vectorised.

    Failures of the whole job come at independent gaps of mean ``part_mtbf_s /
    n_parts``: exponential (a Poisson process, as Daly's formula assumes) or,
    with ``distribution="weibull"``, Weibull of shape ``shape`` and the same
    mean (``failure_gaps``).
    Between two failures the job first restarts (``R``), then completes
    ``floor((X - R) / (tau + C))`` segments, each keeping ``tau`` of work; the
    rest of the gap is lost. Goodput is kept work over total time. The same
    ``n_failures`` gaps serve every interval, so the curve is smooth in ``tau``.

    Args:
        params: the job (its ``interval_s`` and ``work_s`` are not used).
        intervals_s: checkpoint intervals to evaluate, seconds (> 0).
        seed: seeds the gaps between failures.
        n_failures: how many failures to simulate, in [100, 10**7].
        distribution, shape: how the gaps are drawn (``failure_gaps``).

    Returns:
        One row per interval: ``interval_s``, ``goodput`` (simulated),
        ``model_goodput`` (Daly's closed form) and ``job_mtbf_s``.
    """
    tau = np.asarray(intervals_s, dtype=float).ravel()
    if tau.size == 0 or np.any(~np.isfinite(tau)) or np.any(tau <= 0):
        raise ValueError(f"intervals_s={intervals_s!r} must be finite numbers > 0")
    check_int("n_failures", n_failures, 100, 10**7)
    check_int("seed", seed, 0)
    m = params.job_mtbf_s
    gaps = failure_gaps(m, n_failures, seed, distribution, shape)
    usable = np.maximum(gaps - params.restart_s, 0.0)
    kept = np.empty_like(tau)
    for i, t in enumerate(tau):  # one pass per interval keeps memory flat
        kept[i] = t * np.floor(usable / (t + params.checkpoint_cost_s)).sum()
    return pd.DataFrame(
        {
            "interval_s": tau,
            "goodput": kept / gaps.sum(),
            "model_goodput": model_goodput(
                tau, params.checkpoint_cost_s, m, params.restart_s
            ),
            "job_mtbf_s": m,
        }
    )


def checkpoint_bars(
    checkpoint_cost_s: float = 600.0,
    part_mtbf_s: float = 5e7,
    n_parts: int = 4096,
    work_s: float = 86400.0,
    seed: int = 1,
) -> pd.DataFrame:
    """A run checkpointing at the Young/Daly interval, as bars in hours.

    Returns:
        Bars ``lane, start, end, kind, label`` with kinds work, checkpoint,
        lost work and restart; ``attrs`` holds ``checkpoint_cost_s``, ``mtbf_s``
        and ``interval_s`` (for ``cl.checkpointing.diagram``).
    """
    mtbf_s = job_mtbf(part_mtbf_s, n_parts)
    tau_s = young_daly_interval(checkpoint_cost_s, mtbf_s)
    phases = simulate(
        JobParams(
            work_s=work_s,
            interval_s=tau_s,
            checkpoint_cost_s=checkpoint_cost_s,
            restart_s=checkpoint_cost_s,
            part_mtbf_s=part_mtbf_s,
            n_parts=n_parts,
        ),
        seed,
    )
    kind = phases["phase"].where(phases["kept"], "lost work")
    # A cross marks each failure, at the restart that follows it.
    label = kind.map({"restart": "✕"}).fillna("")
    out = pd.DataFrame(
        dict(
            lane="the job",
            start=phases["start_s"] / 3600,
            end=phases["end_s"] / 3600,
            kind=kind,
            label=label,
        )
    )
    out.attrs.update(
        checkpoint_cost_s=checkpoint_cost_s, mtbf_s=mtbf_s, interval_s=tau_s
    )
    return out


__all__ = [
    "DISTRIBUTIONS",
    "JobParams",
    "checkpoint_bars",
    "failure_gaps",
    "goodput_sweep",
    "job_summary",
    "simulate",
]
