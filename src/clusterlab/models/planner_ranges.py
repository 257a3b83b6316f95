"""Claims H6 and L2 over the two unknowns of tensor-parallel traffic.

The planner prices a tensor-parallel group's collectives on one curve and, by
default, leaves all of them exposed. Neither is known from a recipe: the curve
may be the generation-matched 8 x H200 NVLS sweep (the default) or the
Scaling Book's two 8 x H100 points (a pessimistic bound), and a share of the
traffic may hide under the GEMMs (Transformer Engine's ``tp_comm_overlap``, a
collective matmul). These functions run the planner over both, so a verdict
that rests on them is stated as a range:

- :func:`h6_range`: the 70B recipe's exposed TP share and its MFU upper bound,
  beside the fastest plan the planner finds for the same GPUs and batch;
- :func:`l2_range`: 7B on one 8-GPU node, data parallelism with ZeRO-1
  against the fastest tensor-parallel (TP 8) plan;
- :func:`l1_range`: whether the fastest plans follow L1's 13B / 70B rule.
"""

from __future__ import annotations

import pandas as pd

from clusterlab.core.validate import check_float
from clusterlab.models.compute import LLAMA2_7B
from clusterlab.models.planner import plan, recipe_row
from clusterlab.models.planner_rules import rule_table, speed_rule_holds
from clusterlab.models.recipe_comm import H4_CURVES
from clusterlab.models.recipes import Recipe

#: The curves a TP group's all-reduces are priced on, with their labels.
CURVES = H4_CURVES
#: Shares of TP traffic hidden under the GEMMs: none (plain Megatron-LM),
#: half, and nearly all.
OVERLAPS = (0.0, 0.5, 0.9)


def _overlaps(overlaps) -> tuple[float, ...]:
    out = tuple(check_float("tp_overlap", v, 0.0, 1.0) for v in overlaps)
    if not out:
        raise ValueError("overlaps=() is empty: give at least one share in [0, 1]")
    return out


def h6_range(
    recipe: Recipe, *, curves=tuple(CURVES), overlaps=OVERLAPS, best: bool = True
) -> pd.DataFrame:
    """The recipe in the planner at every curve and share of TP hidden.

    Args:
        recipe: the layout (``cl.models.recipes.ESSAY_70B``).
        curves: published all-reduce systems inside a node.
        overlaps: shares of the TP collectives hidden, each in [0, 1].
        best: also plan every layout for the same GPUs and batch at each
            cell and give the fastest one's MFU and layout (slower).

    Returns:
        One row per curve and overlap: ``curve``, ``label``, ``tp_overlap``,
        ``tp_exposed_s``, ``step_s``, ``tp_share`` (exposed TP over the step),
        ``bubble``, ``mfu`` (the planner's upper bound) and, with ``best``,
        ``best_mfu`` and ``best_plan``.
    """
    rows = []
    for curve in curves:
        for hide in _overlaps(overlaps):
            r = recipe_row(recipe, intra_node_system=curve, tp_overlap=hide)
            row = {
                "curve": curve, "label": CURVES.get(curve, curve),
                "tp_overlap": hide, "tp_exposed_s": r["tp_comm_s"],
                "step_s": r["step_s"], "tp_share": r["tp_comm_s"] / r["step_s"],
                "bubble": r["bubble"], "mfu": r["mfu"],
            }  # fmt: skip
            if best:
                df = plan(
                    recipe.model, recipe.n_gpus, global_batch=recipe.global_batch,
                    micro_batch=recipe.micro_batch, intra_node_system=curve,
                    tp_overlap=hide, zero_stages=(1, 3),
                )  # fmt: skip
                top = df[df.feasible].iloc[0]
                row["best_mfu"] = float(top["mfu"])
                row["best_plan"] = f"TP{top.tp} PP{top.pp} DP{top.dp}"
            rows.append(row)
    return pd.DataFrame(rows)


def l2_range(
    model=LLAMA2_7B,
    n_gpus: int = 8,
    *,
    global_batch: int = 64,
    curves=tuple(CURVES),
    overlaps=OVERLAPS,
) -> pd.DataFrame:
    """Data parallelism against TP over a node, at every curve and overlap.

    At each cell the fastest feasible plan with ``tp = n_gpus`` (sequence
    parallelism on or off, any ZeRO stage and recomputation) is set beside
    the fastest with ``dp = n_gpus``.

    Args:
        model: a ``ModelShape`` (Llama 2 7B).
        n_gpus: GPUs, one NVLink domain (8).
        global_batch: sequences per step.
        curves, overlaps: as in :func:`h6_range`.

    Returns:
        One row per curve and overlap: ``curve``, ``label``, ``tp_overlap``,
        ``tp_tokens_per_s``, ``tp_sequence_parallel``, ``dp_tokens_per_s``,
        ``dp_zero_stage`` and ``dp_over_tp`` (> 1: data parallelism faster).
    """
    rows = []
    for curve in curves:
        for hide in _overlaps(overlaps):
            df = plan(model, n_gpus, global_batch=global_batch,
                      intra_node_system=curve, tp_overlap=hide)  # fmt: skip
            ok = df[df.feasible]
            tp, dp = ok[ok.tp == n_gpus], ok[ok.dp == n_gpus]
            if tp.empty or dp.empty:
                raise ValueError(
                    f"n_gpus={n_gpus}: no feasible plan with tp={n_gpus} and one "
                    f"with dp={n_gpus} for {model.name} at global_batch={global_batch}"
                )
            t, d = tp.iloc[0], dp.iloc[0]
            rows.append({
                "curve": curve, "label": CURVES.get(curve, curve),
                "tp_overlap": hide, "tp_tokens_per_s": float(t.tokens_per_s),
                "tp_sequence_parallel": bool(t.sequence_parallel),
                "dp_tokens_per_s": float(d.tokens_per_s),
                "dp_zero_stage": int(d.zero_stage),
                "dp_over_tp": float(d.tokens_per_s / t.tokens_per_s),
            })  # fmt: skip
    return pd.DataFrame(rows)


def l1_range(cases, *, curves=tuple(CURVES), overlaps=OVERLAPS) -> pd.DataFrame:
    """L1's speed rule (``planner_rules.speed_rule_holds``) at every cell.

    Args:
        cases: ``[(ModelShape, n_gpus), ...]``; each is planned with
            ``max(256, n_gpus)`` sequences per step.
        curves, overlaps: as in :func:`h6_range`.

    Returns:
        One row per curve and overlap: ``curve``, ``tp_overlap``,
        ``follows_rule`` (every model's fastest plan as the rule says),
        ``breaks`` (the models whose plan does not, with its TP and PP) and
        ``speedup_<model>`` (fastest plan over DP alone, in MFU) per model.
    """
    rows = []
    for curve in curves:
        for hide in _overlaps(overlaps):
            plans = {
                m.name: (m, plan(m, gpus, global_batch=max(256, gpus),
                                 intra_node_system=curve, tp_overlap=hide))
                for m, gpus in cases
            }  # fmt: skip
            table = rule_table(plans)
            holds = speed_rule_holds(table)
            broken = table[~holds.to_numpy()]
            row = {
                "curve": curve,
                "tp_overlap": hide,
                "follows_rule": bool(holds.all()),
            }
            row["breaks"] = ", ".join(
                f"{r.model} (TP{r.best_tp} PP{r.best_pp})" for r in broken.itertuples()
            )
            for r in table.itertuples():
                row[f"speedup_{r.model}"] = float(r.speedup)
            rows.append(row)
    return pd.DataFrame(rows)


__all__ = ["CURVES", "OVERLAPS", "h6_range", "l1_range", "l2_range"]
