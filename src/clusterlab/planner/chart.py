"""Charts of parallelism plans: memory per GPU against estimated MFU.

Each point is one (TP, PP, DP, ZeRO, recomputation, SP) plan from
``cl.models.planner.plan``, or a 5-D plan (CP, EP and precision too) from
``cl.models.planner5d.plan5d``; a horizontal line marks the usable GPU memory.
Points below the line fit; points further right would run faster.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Range
from clusterlab.core.units import GB
from clusterlab.models.compute import H100_SXM
from clusterlab.models.memory import USABLE_MEMORY_FRACTION
from clusterlab.pipeline.chart import _inline

MEM_AXIS = "memory per GPU (GB, log scale)"


MFU_AXIS = "estimated MFU (share of peak FLOP/s)"


# GPU memory, on the page's slider (planner_explorer) and the live widget's.
GPU_MEMORY_GB = Range(
    "gpu_mem_GB", min=16, max=192, step=8, default=round(H100_SXM.memory_bytes / GB),
    label="GPU memory (GB) ", widget_label="GB per GPU",
)  # fmt: skip


_KEEP = ["tp", "pp", "dp", "zero_stage", "recompute", "sequence_parallel"]


_KEEP += ["memory_GB", "activations_GB", "bubble", "tokens_per_s", "mfu", "plan"]


def planner_sweep(
    plans: pd.DataFrame, label: str | None = None, thin: bool = False
) -> pd.DataFrame:
    """A plan table trimmed for charts: GB columns, a plan label, speed known.

    Args:
        plans: output of ``cl.models.planner.plan`` or ``planner5d.plan5d``.
        label: optional value for a ``model`` column (to stack several sweeps).
        thin: keep only the plans :func:`_thin` keeps (for a small chart).

    Returns:
        Rows whose batch split works (so MFU is defined), fewer columns.
    """
    check_columns(plans, ["tp", "pp", "dp", "memory_bytes", "mfu", "recompute"])
    df = plans[plans["batch_ok"]].copy()
    df["memory_GB"] = df["memory_bytes"] / GB
    df["activations_GB"] = df["activations_bytes"] / GB
    sp = df["sequence_parallel"].map({True: "+SP", False: ""})
    layout = "TP" + df.tp.astype(str)
    for name in ("cp", "pp", "dp", "ep"):  # CP and EP only where they are used
        if name in ("pp", "dp") or (name in df and (df[name] > 1).any()):
            layout = layout + f" {name.upper()}" + df[name].astype(str)
    df["plan"] = layout + (
        " ZeRO-" + df.zero_stage.astype(str) + " " + df.recompute + sp
    )
    if "precision" in df and (df["precision"] != "bf16").any():
        df["plan"] = df["plan"] + " " + df["precision"]
    df = df[_KEEP].round({"memory_GB": 2, "activations_GB": 2, "mfu": 4})
    df = df.round({"bubble": 4, "tokens_per_s": 0})
    if thin:
        df = _thin(df).drop(columns=["tp", "pp", "dp", "sequence_parallel"])
    return df.assign(model=label) if label is not None else df


def _points(base, limit_expr, tokens=True):
    fits = f"datum.memory_GB <= {limit_expr}"
    tooltip = [
        alt.Tooltip("plan:N", title="plan"),
        alt.Tooltip("memory_GB:Q", title="GB per GPU", format=".1f"),
        alt.Tooltip("activations_GB:Q", title="of which activations", format=".1f"),
        alt.Tooltip("bubble:Q", title="bubble", format=".1%"),
    ]
    if tokens:
        tooltip.append(alt.Tooltip("tokens_per_s:Q", title="tokens/s", format=",.0f"))
    tooltip.append(alt.Tooltip("mfu:Q", title="MFU", format=".1%"))
    return base.mark_point().encode(
        x=alt.X("mfu:Q", title=MFU_AXIS, scale=alt.Scale(domain=[0, 0.8])),
        y=alt.Y("memory_GB:Q", title=MEM_AXIS, scale=alt.Scale(type="log")),
        color=alt.Color(
            "recompute:N",
            title="recomputation",
            scale=alt.Scale(domain=["none", "selective", "full"]),
        ),
        shape=alt.Shape("zero_stage:N", title="ZeRO stage"),
        opacity=alt.condition(fits, alt.value(0.95), alt.value(0.15)),
        tooltip=tooltip,
    )


def planner_chart(
    sweep: pd.DataFrame,
    memory_limit_GB: float,
    title: str = "Which plans fit, and how fast would they run?",
) -> alt.LayerChart:
    """One model's plans: memory per GPU against MFU, with the memory line.

    The line's height is a Vega-Lite parameter, ``usable_GB``, so a widget can
    move it by changing one number in the spec.

    Args:
        sweep: output of :func:`planner_sweep`.
        memory_limit_GB: usable memory per GPU (GB), drawn as the line.
        title: chart title.
    """
    check_columns(sweep, ["memory_GB", "mfu", "recompute", "zero_stage", "plan"])
    limit = alt.param(name="usable_GB", value=float(memory_limit_GB))
    rule = (
        alt.Chart(pd.DataFrame({"one": [1]}))
        .transform_calculate(memory_GB="usable_GB")
        .mark_rule(color="#D55E00", strokeDash=[6, 3])
        .encode(y="memory_GB:Q")
    )
    subtitle = (
        "each point is a plan; faint points do not fit in the usable memory "
        "(dashed line); further right runs faster"
    )
    return (
        alt.layer(_points(alt.Chart(sweep), "usable_GB"), rule)
        .add_params(limit)
        .properties(title=alt.TitleParams(title, subtitle=subtitle))
    )


_RECOMPUTE = ["none", "selective", "full"]


def _thin(sweep: pd.DataFrame) -> pd.DataFrame:
    """The plans a chart draws: those no plan of the same layout beats for free.

    Within each layout (TP, PP, DP) a plan is left out when another needs no
    more memory and reaches at least its MFU, one of them strictly (it is not
    on that layout's memory-speed front), and so is a point that coincides
    with another (selective recomputation equals none under FlashAttention).
    Sequence parallelism is a trade, not a free gain: it saves activation
    memory and, on NVSwitch, costs time (its reduce-scatter and all-gather run
    on the ring's curve, an all-reduce on NVLS), so both kinds stay where each
    is on the front.
    """
    keep = np.ones(len(sweep), dtype=bool)
    groups = [c for c in ("model", "tp", "pp", "dp") if c in sweep]
    for _, idx in sweep.groupby(groups, sort=False).indices.items():
        mem = sweep["memory_GB"].to_numpy()[idx]
        mfu = sweep["mfu"].to_numpy()[idx]
        for j, i in enumerate(idx):
            better = (
                (mem <= mem[j]) & (mfu >= mfu[j]) & ((mem < mem[j]) | (mfu > mfu[j]))
            )
            keep[i] = not better.any()
    key = [c for c in ("model", "memory_GB", "mfu", "zero_stage") if c in sweep]
    return sweep[keep].drop_duplicates(key)


def _twin_cases(sweep: pd.DataFrame) -> list[dict]:
    """The static twin's plans, one compact object of columns per model.

    A page carries every point of every model, so only :func:`_thin`'s plans.
    """
    df = _thin(sweep)
    cases = []
    for model, g in df.groupby("model", sort=False):
        cases.append(
            {
                "model": model,
                "x": g["mfu"].round(3).tolist(),
                "y": g["memory_GB"].round(1).tolist(),
                "a": g["activations_GB"].round(1).tolist(),
                "u": g["bubble"].round(3).tolist(),
                "z": g["zero_stage"].astype(int).tolist(),
                "r": [_RECOMPUTE.index(r) for r in g["recompute"]],
                "p": [p.replace(" ZeRO-", " Z").rsplit(" ", 1)[0] for p in g["plan"]],
            }
        )
    return cases


def planner_explorer(
    sweep: pd.DataFrame,
    memory_GB: float | None = None,
    usable_fraction: float = USABLE_MEMORY_FRACTION,
    title: str = "Pick a model and a GPU memory: which plans still fit?",
) -> alt.LayerChart:
    """Static twin of the planner widget: radio for the model, slider for memory.

    The page carries the plans in a compact form (see :func:`_twin_cases`:
    plans dominated within their own layout are left out), so that it stays
    small with four models of several hundred plans each.

    Args:
        sweep: stacked :func:`planner_sweep` outputs with a ``model`` column.
        memory_GB: the slider's start, GB per GPU (None: the H100 SXM5's).
        usable_fraction: share of memory a plan may fill.
        title: chart title.
    """
    check_columns(sweep, ["model", "memory_GB", "mfu", "plan", "tp", "zero_stage"])
    if memory_GB is None:
        memory_GB = H100_SXM.memory_bytes / GB
    models = list(dict.fromkeys(sweep["model"]))
    pick = alt.param(
        name="model_pick",
        value=models[-1],
        bind=alt.binding_radio(options=models, name="model and GPUs "),
    )
    mem = GPU_MEMORY_GB.param(value=memory_GB)
    limit = f"gpu_mem_GB * {usable_fraction}"
    base = (
        alt.Chart(_inline(_twin_cases(sweep)))
        .transform_filter("datum.model == model_pick")
        .transform_flatten(["x", "y", "a", "u", "z", "r", "p"])
        .transform_calculate(
            mfu="datum.x",
            memory_GB="datum.y",
            activations_GB="datum.a",
            bubble="datum.u",
            zero_stage="datum.z",
            recompute=f"{_RECOMPUTE}[datum.r]",
            plan="datum.p + ' ' + " + f"{_RECOMPUTE}[datum.r]",
        )
    )
    rule = (
        alt.Chart(pd.DataFrame({"one": [1]}))
        .transform_calculate(memory_GB=limit)
        .mark_rule(color="#D55E00", strokeDash=[6, 3])
        .encode(y="memory_GB:Q")
    )
    subtitle = [
        f"dashed: {usable_fraction:.0%} of the GPU memory; faint plans do not fit; "
        "further right runs faster (estimate);",
        "plans beaten within their layout (more memory, no faster) are left out",
    ]
    return (
        alt.layer(_points(base, limit, tokens=False), rule)
        .add_params(pick, mem)
        .properties(title=alt.TitleParams(title, subtitle=subtitle))
    )


__all__ = ["planner_chart", "planner_explorer", "planner_sweep"]
