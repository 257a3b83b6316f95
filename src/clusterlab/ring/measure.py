"""Measure a ring with one slow hop, and decide whether a model explains it.

``measure_slow_hop`` times the package's ring all-reduce three ways on real
ranks: every hop fast; one rank's hop to its neighbour slowed (a known delay
per message and, optionally, a bandwidth cap; ``cl.ring.ranks``); every hop
slowed the same way. The cases take turns inside each repeat, so a burst of
load on a busy machine hits all three alike. ``slow_hop_verdict`` compares the
best times with a model's predictions within a bound made of the spread the
repeats measured. Its verdicts are ``cl.core.busy``'s, so ``cl.core.busy.retry``
measures again, at most a few times, when a busy machine spoiled one, and says
so in plain words.

``measure_step_speedup`` does the same for a training step: compute (a sleep)
followed by a ring all-reduce over a slow network and over a faster one.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from clusterlab.core.bench import _group_device, _sync
from clusterlab.core.validate import check_float, check_int

#: The three rings that ``measure_slow_hop`` times.
CASES = ("uniform fast", "one slow hop", "every hop slow")


def _timed(fn, device) -> float:
    import torch.distributed as dist

    dist.barrier()
    t0 = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t0


def _overshoot_s(delay_s: float, tries: int = 5) -> float:
    """Median seconds ``time.sleep(delay_s)`` oversleeps on this machine now."""
    over = []
    for _ in range(tries):
        t0 = time.perf_counter()
        time.sleep(delay_s)
        over.append(time.perf_counter() - t0 - delay_s)
    return float(np.median(over))


def _hop_worker(rank, world_size, *, numel, slow, slow_rank, repeats, warmup):
    import torch

    from clusterlab.ring.ranks import ring_allreduce

    device = _group_device()
    x = torch.zeros(numel, device=device)  # zeros: repeated sums never overflow
    plans = {
        "uniform fast": {},
        "one slow hop": slow if rank == slow_rank else {},
        "every hop slow": slow,
    }
    for _ in range(warmup):
        ring_allreduce(x)
    rows = []
    for rep in range(repeats):
        for case, kw in plans.items():
            t = _timed(lambda kw=kw: ring_allreduce(x, **kw), device)
            rows.append((case, rep, t))
    return {"rows": rows, "overshoot_s": _overshoot_s(slow["send_delay_s"] or 1e-3)}


def measure_slow_hop(
    world_size: int = 4,
    nbytes: int = 2**20,
    *,
    send_delay_s: float = 1e-3,
    send_Bps: float | None = None,
    slow_rank: int = 0,
    repeats: int = 5,
    warmup: int = 2,
    backend: str = "auto",
) -> pd.DataFrame:
    """Time a ring all-reduce with every hop fast, one hop slow, every hop slow.

    Args:
        world_size: ranks in the ring, in [2, 64].
        nbytes: bytes of the float32 tensor all-reduced, in [4 * world_size, 2**30].
        send_delay_s: seconds the slow hop adds to each message, in [0, 60].
        send_Bps: the slow hop's bandwidth cap, bytes/s (None: no cap).
        slow_rank: the rank whose hop to its right-hand neighbour is slow.
        repeats: timed runs of each case, in [2, 100].
        warmup: untimed runs first, in [0, 100].
        backend: passed to ``cl.launch``.

    Returns:
        One row per case and repeat: ``case, repeat, time_s`` (the slowest
        rank's time: a collective ends when its last rank does), with
        ``attrs``: ``world_size, nbytes, send_delay_s, send_Bps, slow_rank``
        and ``overshoot_s`` (the most any rank's ``time.sleep`` overslept).
    """
    from clusterlab.core.launcher import launch

    n = check_int("world_size", world_size, 2, 64)
    nbytes = check_int("nbytes", nbytes, 4 * n, 2**30)
    check_int("slow_rank", slow_rank, 0, n - 1)
    check_float("send_delay_s", send_delay_s, 0.0, 60.0)
    if send_Bps is not None:
        check_float("send_Bps", send_Bps, 1.0, 1e15)
    slow = {"send_delay_s": send_delay_s, "send_Bps": send_Bps}
    out = launch(
        _hop_worker,
        n,
        backend=backend,
        numel=nbytes // 4,
        slow=slow,
        slow_rank=slow_rank,
        repeats=check_int("repeats", repeats, 2, 100),
        warmup=check_int("warmup", warmup, 0, 100),
    )
    df = slowest_rank_times(out)
    df.attrs.update(
        world_size=n,
        nbytes=nbytes,
        overshoot_s=max(r["overshoot_s"] for r in out),
        slow_rank=slow_rank,
        **slow,
    )
    return df


def slowest_rank_times(out: list[dict]) -> pd.DataFrame:
    """Per case and repeat, the slowest rank's seconds.

    Args:
        out: one dict per rank, each with ``rows`` of (case, repeat, time_s).

    Returns:
        A DataFrame with ``case``, ``repeat`` and ``time_s`` (the largest over ranks).
    """
    raw = pd.DataFrame(
        [r for rank in out for r in rank["rows"]], columns=["case", "repeat", "time_s"]
    )
    return raw.groupby(["case", "repeat"], as_index=False, sort=False)["time_s"].max()


def summarize_timings(df: pd.DataFrame) -> pd.DataFrame:
    """Best, median and spread of each case's repeats.

    Args:
        df: rows ``case, repeat, time_s`` (from ``measure_slow_hop`` or
            ``measure_step_speedup``).

    Returns:
        One row per case (in order of first appearance): ``best_s`` (noise
        only adds time, so the best run is the measurement), ``median_s``,
        ``spread_s`` (median minus best: how far a typical run strays) and
        ``gap_s`` (second best minus best: how well the best run is known).
    """
    g = df.groupby("case", sort=False)["time_s"]
    second = g.apply(lambda t: t.nsmallest(2).iloc[-1])
    out = pd.DataFrame({"best_s": g.min(), "median_s": g.median()})
    out = out.assign(spread_s=out["median_s"] - out["best_s"])
    return out.assign(gap_s=second - out["best_s"])


def slow_hop_verdict(df: pd.DataFrame, predicted: dict, *, k: float = 3.0) -> dict:
    """Decide whether ``predicted`` seconds explain a measured slow-hop ring.

    The bound is ``k`` times the largest spread of any case's repeats, plus
    ``2 (n - 1)`` times the measured oversleep of one delay. The measurement
    decides only if that bound is under half of what slowing every hop
    cost (``every hop slow`` minus ``uniform fast``); otherwise the verdict is
    ``busy`` (the machine too busy to tell).

    Args:
        df: from ``measure_slow_hop``.
        predicted: seconds for ``"one slow hop"`` and ``"every hop slow"``.
        k: how many spreads the bound allows, in [1, 10].

    Returns:
        dict with ``status`` (``pass``, ``miss`` or ``busy``), ``text`` (plain
        words), ``bound_s``, ``effect_s`` and ``table`` (measured against
        predicted, per case).
    """
    k = check_float("k", k, 1.0, 10.0)
    missing = [c for c in CASES[1:] if c not in predicted]
    if missing:
        raise ValueError(f"predicted={predicted!r} lacks {missing}")
    s = summarize_timings(df)
    n = df.attrs.get("world_size", 2)
    bound = k * s["spread_s"].max() + 2 * (n - 1) * max(df.attrs["overshoot_s"], 0)
    effect = s.at["every hop slow", "best_s"] - s.at["uniform fast", "best_s"]
    table = s[["best_s"]].assign(predicted_s=pd.Series(predicted))
    table["miss_s"] = table["best_s"] - table["predicted_s"]
    misses = table["miss_s"].abs().dropna()
    same = abs(s.at["one slow hop", "best_s"] - s.at["every hop slow", "best_s"])
    ms = f"bound {bound * 1e3:.2f} ms"
    if not effect > 2 * bound:
        status = "busy"
        text = (
            f"the repeats strayed too far ({ms}) to resolve the slow hop's "
            f"{effect * 1e3:.2f} ms: the machine is probably busy"
        )
    elif misses.max() <= bound and same <= bound:
        status = "pass"
        text = (
            f"the model is within {misses.max() * 1e3:.2f} ms of every case "
            f"({ms}); one slow hop and every hop slow differ by {same * 1e3:.2f} ms"
        )
    else:
        worst = misses.idxmax()
        status = "miss"
        text = (
            f"'{worst}' measured {s.at[worst, 'best_s'] * 1e3:.2f} ms, the model "
            f"says {predicted[worst] * 1e3:.2f} ms: off by more than the {ms}"
        )
    return {
        "status": status,
        "text": text,
        "bound_s": bound,
        "effect_s": effect,
        "table": table,
    }


def _step_worker(rank, world_size, *, numel, compute_s, links, repeats):
    import torch

    from clusterlab.ring.ranks import ring_allreduce

    device = _group_device()
    x = torch.zeros(numel, device=device)
    ring_allreduce(x)  # warm the connections
    rows = []
    for rep in range(repeats):
        rows.append(("compute", rep, _timed(lambda: time.sleep(compute_s), device)))
        for name, bps in links.items():

            def comm(bps=bps):
                ring_allreduce(x, send_Bps=bps)

            def step(comm=comm):
                time.sleep(compute_s)
                comm()

            rows.append((f"{name} all-reduce", rep, _timed(comm, device)))
            rows.append((f"{name} step", rep, _timed(step, device)))
    return rows


def measure_step_speedup(
    links: dict,
    *,
    world_size: int = 4,
    nbytes: int = 2**20,
    compute_s: float = 0.01,
    repeats: int = 5,
    backend: str = "auto",
) -> pd.DataFrame:
    """Time compute, a capped ring all-reduce, and whole steps on each network.

    Every hop of the ring is capped at the network's bytes/s, so the
    all-reduce is the network's; the compute is a ``time.sleep``.

    Args:
        links: name -> bandwidth cap per hop, bytes/s (e.g. an old network and
            a faster one).
        world_size: ranks, in [2, 64].
        nbytes: bytes of the float32 gradient, in [4 * world_size, 2**30].
        compute_s: seconds of compute per step, in [0, 10].
        repeats: timed runs of each, in [2, 100].
        backend: passed to ``cl.launch``.

    Returns:
        Rows ``case, repeat, time_s`` (slowest rank), with cases ``compute``,
        ``<name> all-reduce`` and ``<name> step`` for each network.
    """
    from clusterlab.core.launcher import launch

    n = check_int("world_size", world_size, 2, 64)
    for name, bps in links.items():
        check_float(f"links[{name!r}]", bps, 1.0, 1e15)
    out = launch(
        _step_worker,
        n,
        backend=backend,
        numel=check_int("nbytes", nbytes, 4 * n, 2**30) // 4,
        compute_s=check_float("compute_s", compute_s, 0.0, 10.0),
        links=dict(links),
        repeats=check_int("repeats", repeats, 2, 100),
    )
    raw = pd.DataFrame(
        [r for rank in out for r in rank], columns=["case", "repeat", "time_s"]
    )
    return raw.groupby(["case", "repeat"], as_index=False, sort=False)["time_s"].max()


def speedup_verdict(
    df: pd.DataFrame, old: str, new: str, predicted: float, *, k: float = 2.0
) -> dict:
    """Decide whether a predicted step speedup, ``old`` to ``new``, was measured.

    The measured speedup is the best old step over the best new step. Its
    bound is what ``k`` times the largest gap between the best and the second
    best run of any case, added to both steps, can do to that ratio; the
    measurement decides only if the bound is under half of the speedup's
    distance from 1, and no all-reduce alone took longer than its whole step
    (which only other programs' load can do).

    Args:
        df: from ``measure_step_speedup``.
        old, new: the two networks' names, as passed to it.
        predicted: the model's old step / new step.
        k: how many spreads the bound allows, in [1, 10].

    Returns:
        dict with ``status`` (``pass``, ``miss`` or ``busy``), ``text``,
        ``measured``, ``predicted``, ``bound`` and ``table`` (the summary).
    """
    k = check_float("k", k, 1.0, 10.0)
    s = summarize_timings(df)
    measured = s.at[f"{old} step", "best_s"] / s.at[f"{new} step", "best_s"]
    spread = k * s["gap_s"].max()
    bound = spread * (1 + measured) / s.at[f"{new} step", "best_s"]
    words = f"measured {measured:.2f}x, the model {predicted:.2f}x, bound {bound:.2f}"
    # a part slower than the whole step that contains it is load, not physics
    odd = [
        k
        for k in (old, new)
        if s.at[f"{k} all-reduce", "best_s"] > s.at[f"{k} step", "best_s"] + spread
    ]
    if odd:
        status = "busy"
        text = (
            f"{words}: the {odd[0]} all-reduce alone took longer than its whole "
            "step, so other programs slowed some runs: the machine is busy"
        )
    elif not abs(measured - 1) > 2 * bound:
        status, text = "busy", f"{words}: too noisy to tell, the machine is busy"
    elif abs(measured - predicted) <= bound:
        status, text = "pass", f"{words}: the model holds"
    else:
        status, text = "miss", f"{words}: off by more than the bound"
    return {
        "status": status,
        "text": text,
        "measured": measured,
        "predicted": predicted,
        "bound": bound,
        "table": s,
    }


__all__ = [
    "CASES",
    "measure_slow_hop",
    "measure_step_speedup",
    "slow_hop_verdict",
    "slowest_rank_times",
    "speedup_verdict",
    "summarize_timings",
]
