"""Measure mixed-speed ranks and a shared network, and decide whether a model fits.

Two measurements on real ranks back the contention models
(``cl.models.contention``):

* ``measure_mixed_step``: ranks of different (simulated) speeds each do their
  share of a step's work, a ``time.sleep``, then all-reduce; once with equal
  shares, as a plain data-parallel loop splits work, and once with shares in
  proportion to speed. ``predict_mixed_steps`` turns a throughput model such as
  ``mixed_cluster_throughput`` into step times, and ``mixed_step_verdict``
  compares them with the measured steps within a bound made of the runs' spread.
* ``contention_verdict``: a step of compute and a ring all-reduce, measured by
  ``cl.ring.measure.measure_step_speedup`` with the ring's bandwidth whole,
  with a share of it taken, and uncapped; a drop model such as
  ``contention_drop``, given the measured network-bound share, must predict the
  measured slowdown, and its inverse must give that share back.

Timings are noisy on a busy machine: every verdict is ``pass``, ``miss`` or
``busy`` (too busy to tell), for ``cl.core.busy.retry``.
"""

from __future__ import annotations

import time

import pandas as pd

from clusterlab.core.bench import _group_device, _sync
from clusterlab.core.validate import check_float, check_int
from clusterlab.models.contention import (
    contention_drop,
    mixed_cluster_throughput,
    network_share_for_drop,
)
from clusterlab.ring.measure import (
    _overshoot_s,
    slowest_rank_times,
    speedup_verdict,
    summarize_timings,
)

#: The cases ``measure_mixed_step`` times, in order.
MIXED_CASES = ("all-reduce alone", "equal split", "split by speed")


def _mixed_worker(rank, world_size, *, speeds, work_s, numel, repeats):
    import torch
    import torch.distributed as dist

    device = _group_device()
    x = torch.zeros(numel, device=device)
    dist.all_reduce(x)  # warm the connections
    mine = speeds[rank]
    sleep_s = {
        "all-reduce alone": 0.0,
        "equal split": work_s / mine,  # one unit of work at this rank's speed
        "split by speed": world_size * work_s / sum(speeds),
    }
    rows = []
    for rep in range(repeats):
        for case, s in sleep_s.items():
            dist.barrier()
            t0 = time.perf_counter()
            if s:
                time.sleep(s)
            dist.all_reduce(x)
            _sync(device)
            rows.append((case, rep, time.perf_counter() - t0))
    return {"rows": rows, "overshoot_s": _overshoot_s(work_s)}


def measure_mixed_step(
    speeds, work_s: float = 0.04, *, repeats: int = 5, backend: str = "auto"
) -> pd.DataFrame:
    """Time a synchronous step on ranks of different speeds, two ways of splitting.

    Rank ``r`` works ``units / speeds[r] * work_s`` seconds (a sleep: one unit
    of work takes ``work_s`` on a rank of speed 1), then every rank all-reduces
    a small tensor. ``equal split`` gives every rank one unit; ``split by
    speed`` gives rank ``r`` ``n * speeds[r] / sum(speeds)`` units, the same
    total; ``all-reduce alone`` does no work. The cases take turns in each
    repeat, so a burst of load hits all three alike.

    Args:
        speeds: relative speed of each rank (> 0); its length is the number of
            ranks, in [2, 16].
        work_s: seconds one unit of work takes at speed 1, in (0, 10].
        repeats: timed runs of each case, in [2, 100].
        backend: passed to ``cl.launch``.

    Returns:
        Rows ``case, repeat, time_s`` (the slowest rank's time), with ``attrs``
        ``speeds``, ``work_s`` and ``overshoot_s`` (the most any rank's
        ``time.sleep(work_s)`` overslept).
    """
    from clusterlab.core.launcher import launch

    speeds = [check_float("speeds", s, 0.0, low_inclusive=False) for s in speeds]
    n = check_int("len(speeds)", len(speeds), 2, 16)
    work_s = check_float("work_s", work_s, 0.0, 10.0, low_inclusive=False)
    out = launch(
        _mixed_worker,
        n,
        backend=backend,
        speeds=speeds,
        work_s=work_s,
        numel=1024,
        repeats=check_int("repeats", repeats, 2, 100),
    )
    df = slowest_rank_times(out)
    df.attrs.update(
        speeds=speeds,
        work_s=work_s,
        overshoot_s=max(r["overshoot_s"] for r in out),
    )
    return df


def predict_mixed_steps(df: pd.DataFrame, model=mixed_cluster_throughput) -> dict:
    """Step seconds a throughput model predicts for ``measure_mixed_step``'s cases.

    A step is ``n`` units of work; a cluster doing ``throughput`` units per
    ``work_s`` finishes it in ``n / throughput * work_s``, then all-reduces
    (the measured ``all-reduce alone``). The model's ``synchronous`` throughput
    prices the equal split, its ``balanced`` one the split by speed.

    Args:
        df: from ``measure_mixed_step`` (its ``attrs`` name the speeds).
        model: ``model(counts, speeds)`` returning ``synchronous`` and
            ``balanced`` throughputs (``cl.models.contention``'s by default).

    Returns:
        Seconds for ``"equal split"`` and ``"split by speed"``.
    """
    speeds, work_s = df.attrs["speeds"], df.attrs["work_s"]
    n = len(speeds)
    out = model([1] * n, speeds)
    comm = summarize_timings(df).at["all-reduce alone", "best_s"]
    return {
        "equal split": comm + n / out["synchronous"] * work_s,
        "split by speed": comm + n / out["balanced"] * work_s,
    }


def mixed_step_verdict(df: pd.DataFrame, predicted: dict, *, k: float = 3.0) -> dict:
    """Decide whether predicted step seconds explain a measured mixed-speed step.

    The bound is ``k`` times the largest gap between the best and the second
    best run of any case (how well each best run is known), plus the measured
    oversleep of one sleep, plus the all-reduce alone: in a step, ranks that
    finish early start the all-reduce early, and part of it can run while the
    slowest rank still works, so a step may end up to that much early. The
    measurement decides only if the bound is under half of the difference
    between the two splits, measured or predicted (whichever is larger: a
    model or a run that sees no difference must still be judged); otherwise
    ``busy``.

    Args:
        df: from ``measure_mixed_step``.
        predicted: seconds for ``"equal split"`` and ``"split by speed"``.
        k: how many gaps the bound allows, in [1, 10].

    Returns:
        dict with ``status`` (``pass``, ``miss`` or ``busy``), ``text``,
        ``bound_s``, ``effect_s`` and ``table`` (measured against predicted).
    """
    k = check_float("k", k, 1.0, 10.0)
    missing = [c for c in MIXED_CASES[1:] if c not in predicted]
    if missing:
        raise ValueError(f"predicted={predicted!r} lacks {missing}")
    s = summarize_timings(df)
    over = max(df.attrs.get("overshoot_s", 0.0), 0.0)
    bound = k * s["gap_s"].max() + over + s.at["all-reduce alone", "best_s"]
    effect = max(
        abs(s.at["equal split", "best_s"] - s.at["split by speed", "best_s"]),
        abs(predicted["equal split"] - predicted["split by speed"]),
    )
    table = s[["best_s"]].assign(predicted_s=pd.Series(predicted))
    table["miss_s"] = table["best_s"] - table["predicted_s"]
    misses = table["miss_s"].abs().dropna()
    ms = f"bound {bound * 1e3:.1f} ms"
    if not effect > 2 * bound:
        status = "busy"
        text = (
            f"the repeats strayed too far ({ms}) to resolve the "
            f"{effect * 1e3:.1f} ms between the two splits: the machine is busy"
        )
    elif misses.max() <= bound:
        status = "pass"
        text = f"the model is within {misses.max() * 1e3:.1f} ms of both splits ({ms})"
    else:
        worst = misses.idxmax()
        status = "miss"
        text = (
            f"'{worst}' measured {s.at[worst, 'best_s'] * 1e3:.1f} ms, the model "
            f"says {predicted[worst] * 1e3:.1f} ms: off by more than the {ms}"
        )
    return {
        "status": status,
        "text": text,
        "bound_s": bound,
        "effect_s": effect,
        "table": table,
    }


def contention_verdict(
    df: pd.DataFrame,
    stolen_share: float,
    *,
    names=("alone", "shared", "free"),
    drop_model=contention_drop,
    share_model=network_share_for_drop,
) -> dict:
    """Decide whether a drop model explains a step measured with bandwidth taken.

    Only the part of the step that waits on bandwidth stretches when bandwidth
    is taken; the ring's fixed costs (latency, waking up, bookkeeping) do not.
    So the network-bound share ``f`` is measured as the capped all-reduce minus
    the same ring uncapped (``free``), over the whole step with the bandwidth
    ``alone``. The model's drop at ``f`` and ``stolen_share`` predicts the
    slowdown, ``1 / (1 - drop)``, which ``speedup_verdict`` sets against the
    measured ``shared`` step over the ``alone`` step. Then ``share_model``, given
    the measured drop, must give back the measured ``f`` (within the same bound,
    in units of share): the claim's threshold is that inverse.

    Args:
        df: from ``measure_step_speedup`` with three networks, named in
            ``names``: the whole bandwidth, ``1 - stolen_share`` of it, and no cap
            worth the name (e.g. 1e15 bytes/s).
        stolen_share: fraction of the bandwidth other traffic took, in (0, 1).
        names: the ``(alone, shared, free)`` networks' names in ``df``.
        drop_model: ``drop_model(network_share, stolen_share)``, the fraction
            of throughput lost (``cl.models.contention.contention_drop``).
        share_model: ``share_model(drop, stolen_share)``, the network-bound
            share that drop needs (``network_share_for_drop``).

    Returns:
        ``speedup_verdict``'s dict (``measured`` and ``predicted`` are shared
        step over alone step), plus ``network_share`` (measured),
        ``drop_measured``, ``drop_predicted`` and ``share_from_drop`` (what
        ``share_model`` says the measured drop needed).
    """
    c = check_float("stolen_share", stolen_share, 0.0, 1.0, low_inclusive=False)
    if c >= 1:
        raise ValueError(f"stolen_share={stolen_share!r} is out of range: (0, 1)")
    alone, shared, free = names
    best = summarize_timings(df)["best_s"]
    bandwidth_s = best[f"{alone} all-reduce"] - best[f"{free} all-reduce"]
    f = min(max(bandwidth_s / best[f"{alone} step"], 0.0), 1.0)
    drop = float(drop_model(f, c))
    # the uncapped step plays no part in the ratio: its spread must not widen it
    timed = df[df["case"] != f"{free} step"]
    verdict = speedup_verdict(timed, shared, alone, 1 / (1 - drop))
    lost = 1 - 1 / verdict["measured"]
    back = float(share_model(lost, c)) if 0 <= lost < 1 else float("nan")
    if (
        verdict["status"] == "pass"
        and not abs(back - f) <= verdict["bound"] * (1 - c) / c
    ):
        verdict["status"] = "miss"
        verdict["text"] += (
            f"; but the measured drop, {lost:.0%}, needs {back:.0%} of the step "
            f"network-bound by the share model, and the step was {f:.0%}"
        )
    return dict(
        verdict,
        network_share=f,
        drop_measured=lost,
        drop_predicted=drop,
        share_from_drop=back,
    )


__all__ = [
    "MIXED_CASES",
    "contention_verdict",
    "measure_mixed_step",
    "mixed_step_verdict",
    "predict_mixed_steps",
]
