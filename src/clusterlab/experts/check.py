"""Checks of the experts lab: the layer on ranks, its bytes, its straggler, its loss.

Four checks decide the lab's claims, each able to fail on a wrong input:

* ``expert_layer_matches``: the ranks' outputs and gradients equal one process's;
* ``alltoall_bytes_match``: the bytes each rank sent in the dispatch are what
  ``alltoall_bytes_per_rank`` predicts for uniform routing;
* ``busiest_expert_matches``: the sampled busiest expert is where the order
  statistic puts it;
* ``aux_loss_balances``: the load-balancing loss lowers the imbalance, and
  the same steps without it do not;

and ``dropped_copies`` grades the exercise.
"""

from __future__ import annotations

import pandas as pd
import torch

from clusterlab.core.checks import not_attempted, passed
from clusterlab.core.validate import check_float
from clusterlab.experts.workers import compare
from clusterlab.models.moe import (
    alltoall_bytes_per_rank,
    busiest_expert_load,
    busiest_rank_load,
)


def expert_layer_matches(results, cases, atol: float = 1e-5) -> pd.DataFrame:
    """Decide: each case's ranks agree with the layer in one process.

    Args:
        results: ``launch(ep_worker, ...)``'s return value (per rank, per case).
        cases: the cases, from ``cl.experts.workers.make_case``.
        atol: largest absolute difference allowed.

    Returns:
        One row per case: its shape and the largest differences.
    """
    rows = []
    for i, case in enumerate(cases):
        diff = compare([r[i] for r in results], case, atol)
        rows.append(
            {
                "ranks": len(results),
                "tokens per rank": str(case["tokens_per_rank"]),
                "top_k": case["top_k"],
                "capacity": "none" if case["capacity"] is None else case["capacity"],
                **{k: v for k, v in diff.items() if k != "ok"},
            }
        )
        if not diff["ok"]:
            bad = [k for k, v in diff.items() if k != "ok" and v > atol]
            raise AssertionError(
                f"case {i} ({case['tokens_per_rank']} tokens, top-{case['top_k']}): "
                f"{', '.join(bad)} differ from one process by up to "
                f"{max(diff[k] for k in bad):.3g} (allowed {atol:g})"
            )
    return pd.DataFrame(rows)


def alltoall_bytes_match(
    sent_bytes, case, model=alltoall_bytes_per_rank, sigmas: float = 4.0,
    plan_bytes=None,
) -> pd.DataFrame:  # fmt: skip
    """Decide: each rank sent about the bytes the model predicts.

    The model assumes uniform routing. A random router is uniform only on
    average: each of a rank's ``t * top_k`` copies lands on another rank with
    chance ``(ep - 1) / ep``, so the count of copies it sends varies like a
    binomial one, and each rank may differ from the model by ``sigmas`` of its
    standard deviations (times a copy's bytes). A model that counts every copy,
    or the rank's own share too, is off by a quarter or more at the lab's sizes
    and fails.

    Args:
        sent_bytes: bytes each rank sent to other ranks in one dispatch, counted
            below ``torch.distributed`` (the lab's worker does).
        case: the case they came from (its tokens per rank, width, top_k).
        model: ``fn(tokens_per_rank, hidden, top_k, ep, bytes_per_value)``.
        sigmas: standard deviations allowed per rank, in (0, 10].
        plan_bytes: None, or the bytes the dispatch's own plan says each rank
            sent: the counted bytes must equal them exactly (a dispatch that
            ships its own share or padding over the wire fails).
    """
    sigmas = check_float("sigmas", sigmas, 0.0, 10.0, low_inclusive=False)
    ep = len(sent_bytes)
    value_bytes = case["tokens"].element_size()
    if ep != len(case["tokens_per_rank"]):
        raise ValueError(
            f"sent_bytes has {ep} ranks but the case has {len(case['tokens_per_rank'])}"
        )
    if plan_bytes is not None:
        for rank, (got, plan) in enumerate(zip(sent_bytes, plan_bytes, strict=True)):
            if got != plan:
                raise AssertionError(
                    f"rank {rank}: the all-to-all was handed {got:,} B for other "
                    f"ranks, but the dispatch's plan says {plan:,} B"
                )
    copy_bytes = case["hidden"] * value_bytes
    off = (ep - 1) / ep
    rows = []
    for rank, (got, t) in enumerate(
        zip(sent_bytes, case["tokens_per_rank"], strict=True)
    ):
        want = model(t, case["hidden"], case["top_k"], ep, value_bytes)
        spread = (t * case["top_k"] * off * (1 - off)) ** 0.5 * copy_bytes
        rel = abs(got - want) / want if want else float(got != 0)
        rows.append({"rank": rank, "sent_bytes": got, "model_bytes": want,
                     "allowed_bytes": sigmas * spread, "rel": rel})  # fmt: skip
    table = pd.DataFrame(rows)
    miss = (table.sent_bytes - table.model_bytes).abs() - table.allowed_bytes
    if (miss > 1e-9).any():
        worst = table.loc[miss.idxmax()]
        raise AssertionError(
            f"rank {int(worst['rank'])} sent {worst.sent_bytes:,.0f} B but the model "
            f"predicts {worst.model_bytes:,.0f} B ({worst.rel:.0%} off; random "
            f"routing allows {worst.allowed_bytes:,.0f} B, {sigmas:g} standard "
            "deviations): does the model count only copies bound for other ranks, "
            "(ep - 1) / ep of them?"
        )
    return table


def busiest_expert_matches(
    sweep: pd.DataFrame, tokens: int, top_k: int, model=busiest_expert_load,
    rtol: float = 0.05,
) -> pd.DataFrame:  # fmt: skip
    """Decide: the sampled busiest expert's load is the order statistic's.

    Args:
        sweep: ``cl.experts.sim.busiest_expert_sweep``'s table.
        tokens, top_k: what it routed.
        model: ``fn(tokens, n_experts, top_k)`` returning ``max_load``.
        rtol: relative difference allowed (the normal approximation of a
            binomial runs a little low).
    """
    want = [model(tokens, int(e), top_k)["max_load"] for e in sweep.n_experts]
    table = sweep.assign(model_load=want)
    table["rel"] = (table.busiest_load - table.model_load).abs() / table.model_load
    worst = table.loc[table.rel.idxmax()]
    if worst.rel > rtol:
        raise AssertionError(
            f"with {int(worst.n_experts)} experts the busiest took "
            f"{worst.busiest_load:.1f} copies on average but the model says "
            f"{worst.model_load:.1f} ({worst.rel:.0%} off, allowed {rtol:.0%})"
        )
    return table


def busiest_rank_matches(
    sweep: pd.DataFrame, tokens: int, top_k: int, model=busiest_rank_load,
    rtol: float = 0.05,
) -> pd.DataFrame:  # fmt: skip
    """Decide: the sampled busiest rank's load is the order statistic's.

    The layer waits for the busiest rank, the sum of its experts' loads, not
    for the busiest expert: a model that prices the layer at the busiest
    expert's imbalance overstates it once a rank holds several experts, and
    fails here.

    Args:
        sweep: ``cl.experts.sim.busiest_expert_sweep(..., ep=W)``'s table.
        tokens, top_k: what it routed.
        model: ``fn(tokens, n_experts, top_k, ep)`` returning ``max_load``.
        rtol: relative difference allowed.
    """
    if "busiest_rank_load" not in sweep:
        raise ValueError("sweep has no busiest_rank_load: sample it with ep=W")
    want = [
        model(tokens, int(e), top_k, int(w))["max_load"]
        for e, w in zip(sweep.n_experts, sweep.ep, strict=True)
    ]
    table = sweep.assign(model_rank_load=want)
    table["rank_rel"] = (table.busiest_rank_load - table.model_rank_load).abs() / (
        table.model_rank_load
    )
    worst = table.loc[table.rank_rel.idxmax()]
    if worst.rank_rel > rtol:
        raise AssertionError(
            f"with {int(worst.n_experts)} experts on {int(worst.ep)} ranks the busiest "
            f"rank took {worst.busiest_rank_load:.1f} copies on average but the model "
            f"says {worst.model_rank_load:.1f} ({worst.rank_rel:.0%} off, allowed "
            f"{rtol:.0%}): does it sum the rank's experts, or price the busiest expert?"
        )
    return table


def aux_loss_balances(
    with_aux: pd.DataFrame, without_aux: pd.DataFrame, min_drop: float = 0.3
) -> dict:
    """Decide: the auxiliary loss cut the imbalance; the control did not move.

    Args:
        with_aux, without_aux: ``cl.experts.router.train_router``'s tables,
            trained with and without the loss (same seed).
        min_drop: least fraction by which the imbalance must fall.

    Returns:
        ``{"start", "end", "control_end"}`` imbalances.
    """
    start, end = with_aux.imbalance.iloc[0], with_aux.imbalance.iloc[-1]
    ctrl = without_aux.imbalance.iloc[-1]
    if end > (1 - min_drop) * start:
        raise AssertionError(
            f"the imbalance went from {start:.2f} to {end:.2f}, not down by "
            f"{min_drop:.0%}: did the loss's gradient reach the router?"
        )
    if ctrl < (1 - min_drop) * without_aux.imbalance.iloc[0]:
        raise AssertionError(
            f"without the loss the imbalance fell too ({ctrl:.2f}): something "
            "other than the loss balanced the router"
        )
    return {"start": float(start), "end": float(end), "control_end": float(ctrl)}


def _dropped(ids: torch.Tensor, n_experts: int, capacity: int) -> int:
    load = torch.bincount(ids.reshape(-1), minlength=n_experts)
    return int((load - capacity).clamp(min=0).sum())


_CASES = [
    (torch.tensor([[0, 1], [0, 2], [0, 1], [3, 0]]), 4, 2),
    (torch.tensor([[0], [0], [0], [0], [1]]), 2, 1),
    (torch.tensor([[1, 2], [2, 1]]), 4, 5),
    (torch.tensor([[3, 3 - i % 2] for i in range(9)]), 4, 0),
    (torch.randint(0, 8, (64, 2), generator=torch.Generator().manual_seed(0)), 8, 16),
]


def dropped_copies(fn) -> bool:
    """Check the exercise: ``fn(expert_ids, n_experts, capacity)`` -> copies dropped."""
    name = "dropped_copies"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function dropped_copies")
    for ids, e, cap in _CASES:
        try:
            got = fn(ids.clone(), e, cap)
        except NotImplementedError:
            return not_attempted(name)
        want = _dropped(ids, e, cap)
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if got != want:
            load = torch.bincount(ids.reshape(-1), minlength=e).tolist()
            raise AssertionError(
                f"{name}(loads {load}, capacity {cap}) returned {got!r}, expected "
                f"{want}: each expert drops what it gets beyond its capacity, "
                "max(0, load - capacity), and experts under capacity drop nothing"
            )
    return passed(name, f"{len(_CASES)} cases, capacity 0 to 16")


__all__ = [
    "alltoall_bytes_match",
    "aux_loss_balances",
    "busiest_expert_matches",
    "busiest_rank_matches",
    "dropped_copies",
    "expert_layer_matches",
]
