"""Charts of tensor parallelism's cost: all-reduce time against compute.

The numbers come from ``cl.models.planner.plan_row`` (compute at a stated
matmul efficiency; four all-reduces of one micro-batch's activations per layer,
at NVLink bandwidth inside a node and at InfiniBand bandwidth across nodes,
none of it hidden behind compute).
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from .._validate import check_int
from ..models.compute import LLAMA2_7B, LLAMA2_13B, LLAMA2_70B
from ..models.planner import plan_row

__all__ = ["TP_MODELS", "tp_cost_chart", "tp_cost_sweep"]

#: The models the explorer offers, by name.
TP_MODELS = {m.name: m for m in (LLAMA2_7B, LLAMA2_13B, LLAMA2_70B)}


def tp_cost_sweep(
    models=tuple(TP_MODELS),
    tp_values=(1, 2, 4, 8, 16, 32),
    n_gpus: int = 64,
    global_batch: int = 512,
) -> pd.DataFrame:
    """Compute and TP all-reduce seconds per step for each model and TP degree.

    The GPUs not used by tensor parallelism do data parallelism (ZeRO-3, so that
    every plan fits), with no pipeline; sequences of the model's context length.

    Args:
        models: names from ``TP_MODELS``.
        tp_values: tensor-parallel degrees, each dividing ``n_gpus``.
        n_gpus: GPUs in all, >= 1; nodes hold 8 each.
        global_batch: sequences per step, >= 1.

    Returns:
        DataFrame: ``model, tp, crosses_node, compute_s, tp_comm_s, tp_share``.
    """
    n = check_int("n_gpus", n_gpus, 1)
    rows = []
    for name in models:
        if name not in TP_MODELS:
            raise ValueError(f"model={name!r} is not one of {list(TP_MODELS)}")
        for tp in tp_values:
            if n % check_int("tp", tp, 1, n):
                raise ValueError(f"tp={tp} must divide n_gpus={n}")
            r = plan_row(
                TP_MODELS[name],
                tp=tp,
                pp=1,
                dp=n // tp,
                zero_stage=3,
                recompute="selective",
                sequence_parallel=False,
                global_batch=global_batch,
            )
            comm, comp = r["tp_comm_s"], r["compute_s"]
            rows.append(
                dict(
                    model=name,
                    tp=tp,
                    crosses_node=tp > 8,
                    compute_s=comp,
                    tp_comm_s=comm,
                    tp_share=comm / (comm + comp),
                )
            )
    return pd.DataFrame(rows)


def tp_cost_chart(df: pd.DataFrame, title: str | None = None) -> alt.Chart:
    """Share of the step in TP all-reduces, per TP degree; a radio picks the model.

    Args:
        df: ``tp_cost_sweep``'s table (one or several models).
        title: the chart's title.
    """
    needed = ["model", "tp", "crosses_node", "tp_share"]
    missing = [c for c in needed if c not in getattr(df, "columns", [])]
    if missing:
        raise ValueError(f"df lacks the column(s) {missing}")
    names = list(dict.fromkeys(df["model"]))
    pick = alt.param(
        name="tp_model",
        value=names[0],
        bind=alt.binding_radio(options=names, name="model "),
    )
    data = df.assign(
        where=df["crosses_node"].map(
            {False: "inside a node (NVLink)", True: "across nodes (InfiniBand)"}
        )
    )
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("tp:O", title="tensor-parallel degree (GPUs per layer)"),
            y=alt.Y(
                "tp_share:Q",
                title="share of step time in TP all-reduces",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color(
                "where:N", title="TP group", sort=["inside a node (NVLink)"]
            ),
            tooltip=[
                "model:N",
                "tp:O",
                alt.Tooltip("tp_share:Q", format=".1%"),
                alt.Tooltip("compute_s:Q", format=".2f", title="compute s"),
                alt.Tooltip("tp_comm_s:Q", format=".2f", title="TP comm s"),
            ],
        )
        .add_params(pick)
        .transform_filter("datum.model == tp_model")
        .properties(
            width=380,
            title=alt.TitleParams(
                title or "Tensor parallelism pays a price per layer",
                subtitle="model: 64 H100, rest data-parallel, nothing overlapped; "
                "past 8 GPUs the all-reduces cross the network",
            ),
        )
    )
