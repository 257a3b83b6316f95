"""A real ring all-reduce whose ranks keep deliberately wrong wall clocks.

Each rank gets a ``SkewedClock``: true time plus its own offset, running fast or
slow by its own drift. The rank stamps its log with that clock, sleeps a random
while before each step (a straggler of random size), and then all-reduces a
"gradient" with ``ring_allreduce``. Nothing in the all-reduce reads a clock:
each rank waits for the messages it needs and adds chunks in an order fixed by
its rank and the step. So the sums come out bit for bit the same as in a run
with perfect clocks and no delays, while the merged, timestamp-sorted log
shows ranks finishing a step before another rank had even started it.

Run it from a shell (two ranks, 17 ms apart): ``python -m clusterlab.clocks.ranks``.
"""

from __future__ import annotations

import random
import time

import pandas as pd
import torch
import torch.distributed as dist

from clusterlab.core.launcher import launch
from clusterlab.core.validate import check_float, check_int
from clusterlab.ring.ranks import ring_allreduce


class SkewedClock:
    """A wall clock that is wrong on purpose.

    ``now()`` returns ``time.time() + offset_s``, plus ``drift_ppm`` µs for each
    second since the clock was made, as an oscillator running fast would.

    Args:
        offset_s: error at creation, in [-3600, 3600] s.
        drift_ppm: rate error, in [-1e6, 1e6] ppm (µs per second).
    """

    def __init__(self, offset_s: float = 0.0, drift_ppm: float = 0.0):
        self.offset_s = check_float("offset_s", offset_s, -3600.0, 3600.0)
        self.drift_ppm = check_float("drift_ppm", drift_ppm, -1e6, 1e6)
        self.start_s = time.time()

    def now(self) -> float:
        """This clock's reading, in seconds since the epoch."""
        return self.at(time.time())

    def at(self, true_s: float) -> float:
        """What this clock reads when the machine's own clock reads ``true_s``.

        Taking one reading of ``time.time()`` and passing it here gives the
        skewed and the true time of the same instant, which lets a test on one
        machine tell what the skew did from what the scheduler did.
        """
        return true_s + self.offset_s + (true_s - self.start_s) * self.drift_ppm * 1e-6


def _per_rank(name: str, values, world_size: int) -> list[float]:
    if values is None:
        return [0.0] * world_size
    values = [float(v) for v in values]
    if len(values) != world_size:
        raise ValueError(
            f"{name}={values!r} must give one value per rank (world_size={world_size})"
        )
    return values


def skewed_allreduce_worker(
    rank: int,
    world_size: int,
    *,
    numel: int = 1000,
    steps: int = 3,
    seed: int = 0,
    offsets_s=None,
    drifts_ppm=None,
    max_delay_s: float = 0.0,
) -> dict:
    """One rank: ``steps`` times, wait at random, log, ring all-reduce, log.

    The gradients depend only on ``seed``, the rank and the step; the delays
    come from a separate generator, so a run with delays sums the same numbers.

    Returns:
        ``{"sums": tensor [steps, numel] (CPU), "log": list of dicts}``, each log
        entry with ``rank``, ``step``, ``event`` ("start" or "done"), ``wall_s``
        (this rank's skewed clock) and ``true_s`` (the machine's own clock).
    """
    device = torch.device("cpu")
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", rank)
    clock = SkewedClock(
        _per_rank("offsets_s", offsets_s, world_size)[rank],
        _per_rank("drifts_ppm", drifts_ppm, world_size)[rank],
    )
    delays = random.Random(10_007 * seed + rank)
    data = torch.Generator().manual_seed(1_000 * seed + rank)
    sums, log = [], []
    for step in range(steps):
        grad = torch.randn(numel, generator=data, dtype=torch.float32).to(device)
        time.sleep(delays.uniform(0.0, max_delay_s))
        log.append(dict(rank=rank, step=step, event="start", wall_s=clock.now()))
        log[-1]["true_s"] = time.time()
        ring_allreduce(grad)
        log.append(dict(rank=rank, step=step, event="done", wall_s=clock.now()))
        log[-1]["true_s"] = time.time()
        sums.append(grad.cpu())
    return {"sums": torch.stack(sums), "log": log}


def run_skewed_allreduce(
    world_size: int,
    *,
    offsets_s=None,
    drifts_ppm=None,
    max_delay_s: float = 0.0,
    numel: int = 1000,
    steps: int = 3,
    seed: int = 0,
    backend: str = "auto",
    timeout: float = 60.0,
) -> tuple[list[torch.Tensor], pd.DataFrame]:
    """Launch ``skewed_allreduce_worker`` on ``world_size`` ranks.

    Args:
        world_size: ranks, in [2, 16].
        offsets_s: each rank's clock offset in seconds (default all 0).
        drifts_ppm: each rank's clock drift in ppm (default all 0).
        max_delay_s: each rank sleeps up to this long before each step, in [0, 10].
        numel: elements per gradient, in [1, 10**7].
        steps: all-reduces per rank, in [1, 100].
        seed: seeds the gradients and the delays.
        backend: passed to ``cl.launch``.
        timeout: the launch's timeout in seconds.

    Returns:
        ``(sums, log)``: each rank's ``[steps, numel]`` tensor of all-reduced
        gradients (index = rank), and every rank's log as one DataFrame, with
        ``wall_s`` and ``true_s`` measured from the earliest true start.
    """
    check_int("world_size", world_size, 2, 16)
    _per_rank("offsets_s", offsets_s, world_size)
    _per_rank("drifts_ppm", drifts_ppm, world_size)
    check_float("max_delay_s", max_delay_s, 0.0, 10.0)
    check_int("numel", numel, 1, 10**7)
    check_int("steps", steps, 1, 100)
    out = launch(
        skewed_allreduce_worker,
        world_size,
        backend=backend,
        timeout=timeout,
        numel=numel,
        steps=steps,
        seed=seed,
        offsets_s=offsets_s,
        drifts_ppm=drifts_ppm,
        max_delay_s=max_delay_s,
    )
    log = pd.DataFrame([row for r in out for row in r["log"]])
    t0 = log["true_s"].min()
    log["wall_s"] -= t0
    log["true_s"] -= t0
    return [r["sums"] for r in out], log


def skew_paradoxes(log: pd.DataFrame) -> pd.DataFrame:
    """Pairs the timestamps put in an impossible order.

    No rank can finish step ``k`` of an all-reduce before every rank has
    started it, since the sum needs every rank's part. A pair where rank ``a``'s
    "done" is stamped earlier than rank ``b``'s "start" of the same step is a
    paradox that only wrong clocks can produce.

    Args:
        log: the log of ``run_skewed_allreduce`` (its ``wall_s`` are compared).

    Returns:
        A DataFrame with ``step``, ``done_rank``, ``done_wall_s``,
        ``start_rank``, ``start_wall_s`` and ``early_s`` (how much too early).
    """
    needed = {"rank", "step", "event", "wall_s"}
    if not isinstance(log, pd.DataFrame) or not needed <= set(log.columns):
        raise ValueError(f"log must have the columns {sorted(needed)}")
    done = log[log["event"] == "done"][["step", "rank", "wall_s"]]
    start = log[log["event"] == "start"][["step", "rank", "wall_s"]]
    pairs = done.merge(start, on="step", suffixes=("_done", "_start"))
    pairs = pairs[pairs["wall_s_done"] < pairs["wall_s_start"]]
    return (
        pairs.rename(
            columns={
                "rank_done": "done_rank",
                "wall_s_done": "done_wall_s",
                "rank_start": "start_rank",
                "wall_s_start": "start_wall_s",
            }
        )
        .assign(early_s=lambda d: d["start_wall_s"] - d["done_wall_s"])
        .reset_index(drop=True)
    )


if __name__ == "__main__":
    skewed, log = run_skewed_allreduce(
        2, offsets_s=(0.0, -17e-3), max_delay_s=5e-3, steps=2
    )
    plain, _ = run_skewed_allreduce(2, steps=2)
    same = all(torch.equal(a, b) for a, b in zip(skewed, plain, strict=True))
    print(log.sort_values("wall_s").to_string(index=False))
    print(f"bit-identical to the run with perfect clocks: {same}")
    print(f"impossible orderings in the skewed log: {len(skew_paradoxes(log))}")


__all__ = [
    "SkewedClock",
    "run_skewed_allreduce",
    "skew_paradoxes",
    "skewed_allreduce_worker",
]
