"""Rules of thumb about parallelism, tested against the planner's best plans.

A common rule says: data parallelism alone up to about 13B parameters, add
tensor parallelism above that and pipeline parallelism above about 70B, "or
memory fills". Two readings of it can be checked with
:func:`~clusterlab.models.planner.plan`:

- as a **memory threshold**: does a data-parallel-only plan (TP 1, PP 1, any
  ZeRO stage and recomputation) fit in the GPU at all?
- as a **speed rule**: does the fastest plan that fits use TP exactly above
  the first threshold and PP exactly above the second?

:func:`rule_table` puts both side by side for a few models, and
:func:`speed_rule_holds` says, model by model, whether the fastest plan
follows the rule. Both read only the planner's tables, so they inherit its
assumptions (an upper-bound time model; see its module).
"""

from __future__ import annotations

import pandas as pd

from clusterlab.models.compute import ModelShape


def rule_table(cases: dict) -> pd.DataFrame:
    """Data parallelism alone against the fastest plan, one row per model.

    Args:
        cases: ``name -> (ModelShape, plans)`` with ``plans`` the table of
            ``cl.models.planner.plan`` for that model.

    Returns:
        Columns ``model, n_params, gpus``; ``dp_fits`` (some TP 1, PP 1 plan
        fits in memory), ``dp_GB`` and ``dp_mfu`` of the fastest such plan
        (NaN when none fits); ``best_tp, best_pp, best_GB, best_mfu`` of the
        fastest feasible plan; ``speedup`` = best_mfu / dp_mfu.
    """
    rows = []
    for name, (shape, plans) in cases.items():
        if not isinstance(shape, ModelShape):
            raise ValueError(f"cases[{name!r}] must be (ModelShape, plans)")
        ok = plans[plans["feasible"]]
        if ok.empty:
            raise ValueError(f"cases[{name!r}]: no plan is feasible")
        best = ok.iloc[0]
        dp = ok[(ok["tp"] == 1) & (ok["pp"] == 1)]
        nan = float("nan")
        rows.append(
            dict(
                model=name,
                n_params=shape.n_params,
                gpus=int(best["tp"] * best["pp"] * best["dp"]),
                dp_fits=not dp.empty,
                dp_GB=dp["memory_bytes"].iloc[0] / 1e9 if len(dp) else nan,
                dp_mfu=dp["mfu"].iloc[0] if len(dp) else nan,
                best_tp=int(best["tp"]),
                best_pp=int(best["pp"]),
                best_GB=best["memory_bytes"] / 1e9,
                best_mfu=best["mfu"],
            )
        )
    df = pd.DataFrame(rows)
    df["speedup"] = df["best_mfu"] / df["dp_mfu"]
    return df


def speed_rule_holds(
    table: pd.DataFrame, tp_above: float = 13e9, pp_above: float = 70e9
) -> pd.Series:
    """Whether each model's fastest plan uses TP and PP as the rule says.

    Args:
        table: :func:`rule_table`'s output.
        tp_above: parameters above which the rule adds tensor parallelism.
        pp_above: parameters above which the rule adds pipeline parallelism.

    Returns:
        A boolean Series indexed by model: TP > 1 exactly when ``n_params >
        tp_above`` and PP > 1 exactly when ``n_params > pp_above``. A few
        percent over a threshold counts as at it (Llama 2 70B has 69B).
    """
    if tp_above <= 0 or pp_above <= 0:
        raise ValueError(
            f"tp_above={tp_above} and pp_above={pp_above} must be > 0 parameters"
        )
    n = table["n_params"]
    wants_tp = n > 1.05 * tp_above
    wants_pp = n > 1.05 * pp_above
    holds = ((table["best_tp"] > 1) == wants_tp) & ((table["best_pp"] > 1) == wants_pp)
    return holds.set_axis(table["model"])


__all__ = ["rule_table", "speed_rule_holds"]
