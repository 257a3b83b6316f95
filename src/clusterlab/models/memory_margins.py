"""How close a layout sits to the memory limit, as a sensitivity, not a pass.

The planner keeps 2 + 2 + 12 bytes of model state per parameter (bf16
weights and gradients, fp32 master weights and Adam moments) and lets a plan
fill 90% of a GPU's memory (``memory.USABLE_MEMORY_FRACTION``). Two published
layouts fit within 3% of that limit: DeepSeek-V3's (69.8 of 72 GB) and the
70B recipe without recomputation (69.6 of 72 GB). What the planner leaves out
decides them, so :func:`margin_table` re-plans a layout under the published
choices and shows the margin each leaves:

- **state bytes**: Megatron-Core's distributed optimizer with bf16 weights
  keeps fp32 main gradients, 6 + 12/d bytes per parameter (its documentation's
  table); DeepSeek-V3 keeps fp32 master weights and gradients and bf16 Adam
  moments (its report, section 3.3.3), 2 + 4 + 8/d with a bf16 working copy
  of the weights (an assumption: the report does not state that copy);
- **DualPipe's second copy of the weights** (DeepSeek-V3's schedule keeps two
  copies of the parameters, report section 3.2.1);
- **the share of memory a plan may fill**: 85%, 90% and 95% of the HBM.
"""

from __future__ import annotations

import pandas as pd

from clusterlab.core import published
from clusterlab.core.validate import check_float
from clusterlab.models.planner5d import plan5d_row

#: (weights, gradients, optimizer state) bytes per parameter, with a basis.
STATE_BYTES = {
    "planner (bf16 weights and gradients, fp32 Adam)": (2.0, 2.0, 12.0),
    "Megatron-Core, fp32 main gradients": (2.0, 4.0, 12.0),
    "DeepSeek-V3: fp32 gradients, bf16 moments": (2.0, 4.0, 8.0),
}

#: Shares of HBM a plan may fill.
FILL_SHARES = (0.85, 0.90, 0.95)


def margin_table(
    model,
    plan: dict,
    *,
    states=tuple(STATE_BYTES),
    copies=(1, 2),
    fill_shares=FILL_SHARES,
) -> pd.DataFrame:
    """Peak memory of one plan under each state choice and weight copies.

    Args:
        model: a ``ModelShape`` or ``planner5d.MoEShape``.
        plan: ``plan5d_row`` arguments (``planner5d.layout_plan`` of a
            published layout, or a recipe's degrees); its ``gpu`` sets the HBM.
        states: names of :data:`STATE_BYTES`.
        copies: weight copies to try (2: DualPipe's second copy).
        fill_shares: shares of the HBM a plan may fill, each in (0, 1].

    Returns:
        One row per state and copies: ``state``, ``weight_copies``,
        ``memory_GB``, ``hbm_GB``, then per fill share ``margin_<share>_GB``
        (usable minus peak; negative: it does not fit).
    """
    shares = [check_float("fill_shares", f, 0.0, 1.0, low_inclusive=False)
              for f in fill_shares]  # fmt: skip
    if not shares:
        raise ValueError("fill_shares=() is empty: give at least one share in (0, 1]")
    unknown = [s for s in states if s not in STATE_BYTES]
    if unknown:
        raise ValueError(f"states={unknown!r}: choose from {list(STATE_BYTES)}")
    gpu = plan.get("gpu", "H100 SXM5")
    hbm = float(published.value("gpu_specs", "hbm_bytes", part=gpu))
    rows = []
    for name in states:
        for n in copies:
            r = plan5d_row(model, **(plan | {"state_bytes": STATE_BYTES[name],
                                             "weight_copies": n}))  # fmt: skip
            row = {"state": name, "weight_copies": int(n), "hbm_GB": hbm / 1e9}
            row["memory_GB"] = r["memory_bytes"] / 1e9
            for f in shares:
                row[f"margin_{f:.2f}_GB"] = (f * hbm - r["memory_bytes"]) / 1e9
            rows.append(row)
    return pd.DataFrame(rows)


def recipe_plan(recipe, **changes) -> dict:
    """``plan5d_row`` arguments of a recipe (``cl.models.recipes``), changed.

    Args:
        recipe: a ``Recipe`` (``ESSAY_70B``).
        **changes: arguments to replace (``recompute="none"``...).

    Returns:
        A dict for :func:`margin_table` or ``plan5d_row``.
    """
    plan = dict(tp=recipe.tp, pp=recipe.pp, dp=recipe.dp, zero_stage=recipe.zero_stage)
    plan.update(recompute=recipe.recompute, sequence_parallel=recipe.sequence_parallel)
    plan.update(global_batch=recipe.global_batch, micro_batch=recipe.micro_batch)
    plan.update(gpus_per_node=recipe.gpus_per_node)
    return plan | changes


__all__ = ["FILL_SHARES", "STATE_BYTES", "margin_table", "recipe_plan"]
