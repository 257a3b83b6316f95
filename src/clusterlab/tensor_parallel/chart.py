"""Charts of tensor parallelism's cost: all-reduce time against compute.

The table comes from ``cl.models.tensor_parallel.tp_cost_sweep`` (the
planner's model: published NVLink bus bandwidth at each message size inside a
node, the network link across nodes, nothing hidden behind compute).
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Choice
from clusterlab.models.tensor_parallel import TP_MODELS

# The model, on the live widget's menu and the page's radio (the sweep's models).
TP_MODEL = Choice(
    "tp_model", options=tuple(TP_MODELS), default="Llama 2 7B", label="model "
)


def tp_cost_chart(df: pd.DataFrame, title: str | None = None) -> alt.Chart:
    """Share of the step in TP all-reduces, per TP degree; a radio picks the model.

    Args:
        df: ``cl.models.tensor_parallel.tp_cost_sweep``'s table (one or
            several models).
        title: the chart's title.
    """
    need = ["model", "tp", "crosses_node", "tp_share", "compute_s", "tp_comm_s"]
    check_columns(df, need)
    names = list(dict.fromkeys(df["model"]))
    pick = TP_MODEL.among(names).param(value=names[0])
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


__all__ = ["tp_cost_chart"]
