"""Stragglers, simulated: workers, a barrier, backup workers and local SGD.

Each of ``n_workers`` workers computes for a random time per step (the
distributions of ``cl.models.jitter``), then waits at a barrier for the
others; the all-reduce that follows costs ``allreduce_s``. Two refinements:

* **backup workers** (Chen et al. 2016): the round ends when the fastest
  ``n_workers - backup_workers`` have arrived; the rest are cancelled and their
  gradients dropped;
* **local SGD** (Stich 2019), or gradient accumulation: each worker runs
  ``sync_period`` steps on its own before the barrier, so a round is a sum of
  draws and the all-reduce is paid once per round.

Two engines run the same model on the same random draws: a SimPy model with
one process per worker, which says what happens event by event, and a NumPy
engine (a maximum or a partition per round) fast enough for sweeps. Given the
same seed they must agree to rounding, which is what the tests check.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from clusterlab.core.validate import check_choice, check_float, check_int
from clusterlab.models.jitter import JITTERS

ENGINES = ("simpy", "numpy")


COLUMNS = [
    "engine",
    "round",
    "steps",
    "start_s",
    "compute_s",
    "allreduce_s",
    "round_s",
    "end_s",
    "step_s",
    "idle_frac",
    "wasted_frac",
]


@dataclass(frozen=True)
class StragglerParams:
    """One straggler scenario; every time is in seconds.

    Attributes:
        n_workers: workers in the data-parallel group, in [1, 65536].
        n_steps: training steps to simulate, in [1, 10**6].
        base_s: mean compute time of one worker for one step, > 0.
        jitter: ``"none"``, ``"normal"``, ``"lognormal"`` or ``"exponential"``.
        cv: coefficient of variation of the compute time, in [0, 1].
        slow_workers: workers that are always ``slow_factor`` times slower; they
            are the last ones (ranks ``n_workers - slow_workers`` and up).
        slow_factor: in [1, 100].
        backup_workers: the round waits for the fastest
            ``n_workers - backup_workers``; in [0, n_workers - 1].
        sync_period: local steps per synchronisation, in [1, 64].
        allreduce_s: cost of one synchronisation, >= 0.
    """

    n_workers: int = 16
    n_steps: int = 200
    base_s: float = 0.1
    jitter: str = "normal"
    cv: float = 0.1
    slow_workers: int = 0
    slow_factor: float = 1.0
    backup_workers: int = 0
    sync_period: int = 1
    allreduce_s: float = 0.0

    def __post_init__(self):
        n = check_int("n_workers", self.n_workers, 1, 65536)
        check_int("n_steps", self.n_steps, 1, 10**6)
        check_float("base_s", self.base_s, 0.0, low_inclusive=False)
        check_choice("jitter", self.jitter, JITTERS)
        check_float("cv", self.cv, 0.0, 1.0)
        check_int("slow_workers", self.slow_workers, 0, n)
        check_float("slow_factor", self.slow_factor, 1.0, 100.0)
        check_int("backup_workers", self.backup_workers, 0, n - 1)
        check_int("sync_period", self.sync_period, 1, 64)
        check_float("allreduce_s", self.allreduce_s, 0.0)

    def model_kwargs(self) -> dict:
        """The arguments of ``cl.models.stragglers.expected_step_time``."""
        kw = asdict(self)
        kw.pop("n_steps")
        return kw


def _rng(seed) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(check_int("seed", seed, 0))


def draw_compute_times(params: StragglerParams, seed=0) -> np.ndarray:
    """Every worker's compute time for every step: shape ``(n_steps, n_workers)``.

    The stragglers lab's real run sleeps for exactly these times, so a simulation
    and a real run with the same seed face the same stragglers.

    Args:
        params: the scenario.
        seed: an int >= 0 or a ``numpy.random.Generator``.

    Returns:
        Seconds, >= 0; the last ``slow_workers`` columns are scaled by
        ``slow_factor``.
    """
    p = params
    rng = _rng(seed)
    shape = (p.n_steps, p.n_workers)
    if p.jitter == "none" or p.cv == 0.0:
        times = np.full(shape, p.base_s)
    elif p.jitter == "normal":
        times = np.maximum(0.0, p.base_s * (1 + p.cv * rng.standard_normal(shape)))
    elif p.jitter == "lognormal":
        s = np.sqrt(np.log1p(p.cv**2))
        times = np.exp(np.log(p.base_s) - s * s / 2 + s * rng.standard_normal(shape))
    else:
        times = p.base_s * (1 - p.cv + p.cv * rng.standard_exponential(shape))
    if p.slow_workers:
        times[:, p.n_workers - p.slow_workers :] *= p.slow_factor
    return times


def _round_starts(p: StragglerParams) -> np.ndarray:
    return np.arange(0, p.n_steps, p.sync_period)


def _numpy_engine(p: StragglerParams, draws: np.ndarray) -> dict:
    starts = _round_starts(p)
    work = np.add.reduceat(draws, starts, axis=0)  # each worker's time per round
    k = p.n_workers - p.backup_workers
    if k == p.n_workers:
        compute = work.max(axis=1)
    else:
        compute = np.partition(work, k - 1, axis=1)[:, k - 1]
    idle = np.clip(compute[:, None] - work, 0.0, None).sum(axis=1)
    return {"starts": starts, "compute": compute, "idle": idle}


def _simpy_engine(p: StragglerParams, draws: np.ndarray) -> dict:
    import simpy

    env = simpy.Environment()
    starts = _round_starts(p)
    out = {"starts": starts, "compute": [], "idle": []}
    k = p.n_workers - p.backup_workers

    def worker(times, arrivals):
        try:
            for t in times:  # its local steps, back to back
                yield env.timeout(t)
            yield arrivals.put(env.now)
        except simpy.Interrupt:
            pass  # a backup worker cancelled: its gradient is dropped

    def coordinator():
        bounds = np.append(starts, p.n_steps)
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            began = env.now
            arrivals = simpy.Store(env)
            procs = [
                env.process(worker(draws[lo:hi, i], arrivals))
                for i in range(p.n_workers)
            ]
            arrived = []
            for _ in range(k):  # the barrier: wait for the first k workers
                arrived.append((yield arrivals.get()))
            for proc in procs:
                if proc.is_alive:
                    proc.interrupt()
            out["compute"].append(env.now - began)
            out["idle"].append(sum(env.now - t for t in arrived))
            yield env.timeout(p.allreduce_s)  # the all-reduce itself

    env.process(coordinator())
    env.run()
    return {key: np.asarray(val) for key, val in out.items()}


def simulate(params: StragglerParams, seed=0, engine: str = "numpy") -> pd.DataFrame:
    """Simulate a synchronous training run with stragglers, one row per round.

    Args:
        params: the scenario (``StragglerParams``).
        seed: an int >= 0 or a ``numpy.random.Generator``; the same seed gives
            both engines the same draws.
        engine: ``"simpy"`` (event by event) or ``"numpy"`` (vectorised).

    Returns:
        A DataFrame with columns ``engine, round, steps, start_s, compute_s``
        (time until the barrier opened), ``allreduce_s, round_s, end_s, step_s``
        (round time per step), ``idle_frac`` (share of worker time spent waiting
        at the barrier) and ``wasted_frac`` (share spent on cancelled work).
    """
    if not isinstance(params, StragglerParams):
        raise ValueError(f"params={params!r} must be a StragglerParams")
    check_choice("engine", engine, ENGINES)
    p = params
    draws = draw_compute_times(p, seed)
    run = _simpy_engine(p, draws) if engine == "simpy" else _numpy_engine(p, draws)
    steps = np.diff(np.append(run["starts"], p.n_steps))
    compute = run["compute"]
    round_s = compute + p.allreduce_s
    end = np.cumsum(round_s)
    worker_s = p.n_workers * np.where(round_s > 0, round_s, 1.0)
    return pd.DataFrame(
        {
            "engine": engine,
            "round": np.arange(len(steps)),
            "steps": steps,
            "start_s": end - round_s,
            "compute_s": compute,
            "allreduce_s": p.allreduce_s,
            "round_s": round_s,
            "end_s": end,
            "step_s": round_s / steps,
            "idle_frac": run["idle"] / worker_s,
            "wasted_frac": p.backup_workers * compute / worker_s,
        },
        columns=COLUMNS,
    )


def mean_step_time(df: pd.DataFrame) -> float:
    """Mean seconds per step of a run: total time over total steps."""
    missing = {"round_s", "steps"} - set(getattr(df, "columns", ()))
    if missing:
        raise ValueError(f"df lacks the column(s) {sorted(missing)}")
    return float(df["round_s"].sum() / df["steps"].sum())


def straggler_bars(n_workers: int = 8, slow_factor: float = 1.5, seed: int = 0):
    """One synchronous step: compute bars, then the wait for the slowest worker.

    Args:
        n_workers: workers, in [2, 32]; the last one is slowed by ``slow_factor``.
        seed: the simulation's seed.

    Returns:
        Bars ``lane, start, end, kind, label`` in milliseconds.
    """
    n = check_int("n_workers", n_workers, 2, 32)
    p = StragglerParams(n_workers=n, n_steps=1, slow_workers=1, slow_factor=slow_factor)
    times_ms = draw_compute_times(p, seed)[0] * 1e3
    barrier = times_ms.max()
    rows = []
    for w, t in enumerate(times_ms):
        lane = f"worker {w}"
        rows.append(
            dict(lane=lane, start=0.0, end=t, kind="compute", label=f"{t:.0f} ms")
        )
        if t < barrier:
            rows.append(dict(lane=lane, start=t, end=barrier, kind="waiting", label=""))
    return pd.DataFrame(rows)


__all__ = [
    "straggler_bars",
    "StragglerParams",
    "draw_compute_times",
    "mean_step_time",
    "simulate",
]
