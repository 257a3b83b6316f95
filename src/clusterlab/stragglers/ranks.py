"""Stragglers for real: a data-parallel training loop with injected compute times.

Every rank trains the same small linear model on its own data. On each step it
computes a real forward and backward pass, then sleeps until its *drawn* compute
time for that step has passed (the draws come from
``cl.stragglers.sim.draw_compute_times``, so a simulation and this run face the
same stragglers), then joins a real all-reduce:

* ``sync_period == 1``: synchronous SGD, the gradients are all-reduced every step;
* ``sync_period == H > 1``: local SGD, each rank updates on its own and the
  parameters are averaged by an all-reduce every ``H`` steps.

Sleeping rather than spinning keeps the drawn times honest when there are more
ranks than cores. Each rank reports when it reached each all-reduce and when the
all-reduce returned; ``run_straggler_scenarios`` turns those times into rounds
with the same columns as the simulation.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch
import torch.distributed as dist

from clusterlab.core.launcher import launch
from clusterlab.core.validate import check_int
from clusterlab.stragglers.sim import COLUMNS, StragglerParams, draw_compute_times

_WARMUP = 3


def _device() -> torch.device:
    if dist.get_backend() == "nccl":
        return torch.device("cuda", dist.get_rank() % torch.cuda.device_count())
    return torch.device("cpu")


def straggler_train_worker(
    rank: int,
    world_size: int,
    *,
    scenarios: list[dict],
    n_features: int = 1024,
    batch: int = 32,
    lr: float = 0.5,
    seed: int = 0,
) -> list[dict]:
    """One rank of the straggler runs; start it with ``cl.launch``.

    Args:
        rank, world_size: given by the launcher.
        scenarios: each a dict with ``compute_s`` (array of shape
            ``(n_steps, world_size)``, seconds) and ``sync_period`` (steps).
        n_features: parameters of the linear model (the all-reduce's size).
        batch: samples per step on each rank.
        lr: learning rate of plain SGD.
        seed: seeds the data (each rank gets its own) and the true weights.

    Returns:
        Per scenario: ``start`` (s, when the first step began), ``arrive`` and
        ``end`` (s, per round: reaching and leaving the all-reduce), ``loss`` (per
        round) and ``overrun_s`` (how far the real work overshot its draw, worst
        step), all on this machine's monotonic clock.
    """
    device = _device()
    truth = torch.Generator().manual_seed(seed)
    w_true = torch.randn(n_features, generator=truth)
    gen = torch.Generator().manual_seed(seed + 1 + rank)
    # Features scaled by 1/sqrt(n) keep the loss's curvature near 1 for any size,
    # so one learning rate suits synchronous and local SGD alike.
    x = (torch.randn(batch, n_features, generator=gen) / n_features**0.5).to(device)
    y = (x.cpu() @ w_true + 0.1 * torch.randn(batch, generator=gen)).to(device)
    flat = torch.zeros(n_features, device=device)
    for _ in range(_WARMUP):  # the first collectives pay for connection set-up
        dist.all_reduce(flat)
    out = []
    for sc in scenarios:
        draws, period = np.asarray(sc["compute_s"]), int(sc["sync_period"])
        w = torch.zeros(n_features, device=device, requires_grad=True)
        rec = {"arrive": [], "end": [], "loss": [], "overrun_s": 0.0}
        dist.barrier()
        rec["start"] = time.perf_counter()
        for step, drawn_s in enumerate(draws[:, rank]):
            began = time.perf_counter()
            loss = ((x @ w - y) ** 2).mean()
            loss.backward()
            sync = (step + 1) % period == 0 or step + 1 == len(draws)
            with torch.no_grad():
                if period == 1:  # synchronous SGD: average gradients, then step
                    busy = time.perf_counter() - began
                    time.sleep(max(0.0, drawn_s - busy))
                    rec["arrive"].append(time.perf_counter())
                    dist.all_reduce(w.grad)
                    w -= lr * w.grad / world_size
                else:  # local SGD: step alone, average parameters now and then
                    w -= lr * w.grad
                    busy = time.perf_counter() - began
                    time.sleep(max(0.0, drawn_s - busy))
                    if sync:
                        rec["arrive"].append(time.perf_counter())
                        dist.all_reduce(w)
                        w /= world_size
                w.grad = None
            rec["overrun_s"] = max(rec["overrun_s"], busy - drawn_s)
            if sync:
                rec["end"].append(time.perf_counter())
                rec["loss"].append(loss.item())
        out.append(rec)
    return out


def _lateness(recs: list[dict], draws: np.ndarray, period: int) -> np.ndarray:
    """Per round, how late the latest rank reached the all-reduce, seconds.

    A rank is late by the time from leaving the previous all-reduce (or the
    start) to reaching this one, minus the compute it drew for the round: a slow
    wake-up from sleep, a real pass longer than its draw, or a busy machine's
    scheduler. The simulation sees none of it, so a real round may exceed the
    simulated one by up to this much.
    """
    starts = np.arange(0, len(draws), period)
    worst = np.zeros(len(starts))
    for rank, rec in enumerate(recs):
        drawn = np.add.reduceat(draws[:, rank], starts)
        began = np.concatenate([[rec["start"]], rec["end"][:-1]])
        worst = np.maximum(worst, np.asarray(rec["arrive"]) - began - drawn)
    return np.clip(worst, 0.0, None)


def run_straggler_scenarios(
    scenarios: dict[str, StragglerParams],
    seed: int = 0,
    *,
    n_features: int = 1024,
    timeout: float = 60.0,
) -> pd.DataFrame:
    """Run each scenario for real on ``n_workers`` ranks; one row per round.

    Args:
        scenarios: name -> ``StragglerParams``; all with the same ``n_workers``
            (the world size, at most 8) and no backup workers (an all-reduce
            needs every rank).
        seed: the seed of the drawn compute times (as in ``simulate``).
        n_features: parameters of the model, so the all-reduce carries
            ``4 * n_features`` bytes.
        timeout: seconds of the process group's timeout.

    Returns:
        A DataFrame with the simulation's columns (``engine`` is ``"real"``;
        ``allreduce_s`` is the time from the last rank's arrival to the end of
        the all-reduce) plus ``scenario``, ``loss``, ``overrun_s`` and
        ``late_s`` (per round, how late the latest rank reached the all-reduce
        beyond its drawn compute, seconds).
    """
    if not scenarios:
        raise ValueError("scenarios={} must name at least one StragglerParams")
    sizes = {p.n_workers for p in scenarios.values()}
    if len(sizes) != 1:
        raise ValueError(f"scenarios use n_workers={sorted(sizes)}; use one size")
    world_size = check_int("n_workers", sizes.pop(), 1, 8)
    if any(p.backup_workers for p in scenarios.values()):
        raise ValueError("backup_workers must be 0 in a real run: see the chapter")
    check_int("n_features", n_features, 1, 2**24)
    jobs = [
        {"compute_s": draw_compute_times(p, seed), "sync_period": p.sync_period}
        for p in scenarios.values()
    ]
    per_rank = launch(
        straggler_train_worker,
        world_size,
        timeout=timeout,
        scenarios=jobs,
        n_features=n_features,
        seed=seed,
    )
    frames = []
    for i, (name, p) in enumerate(scenarios.items()):
        recs = [r[i] for r in per_rank]
        arrivals = np.array([r["arrive"] for r in recs])  # (ranks, rounds)
        late = _lateness(recs, jobs[i]["compute_s"], p.sync_period)
        arrive = arrivals.max(axis=0)
        end = np.max([r["end"] for r in recs], axis=0)
        t0 = max(r["start"] for r in recs)
        start = np.concatenate([[t0], end[:-1]])
        steps = np.diff(np.append(np.arange(0, p.n_steps, p.sync_period), p.n_steps))
        round_s = end - start
        df = pd.DataFrame(
            {
                "engine": "real",
                "round": np.arange(len(end)),
                "steps": steps,
                "start_s": start - t0,
                "compute_s": arrive - start,
                "allreduce_s": end - arrive,
                "round_s": round_s,
                "end_s": end - t0,
                "step_s": round_s / steps,
                "idle_frac": (arrive - arrivals).sum(axis=0) / (world_size * round_s),
                "wasted_frac": 0.0,
            },
            columns=COLUMNS,
        )
        df.insert(0, "scenario", name)
        df["loss"] = np.mean([r["loss"] for r in recs], axis=0)
        df["overrun_s"] = max(r["overrun_s"] for r in recs)
        df["late_s"] = late
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


__all__ = ["run_straggler_scenarios", "straggler_train_worker"]
