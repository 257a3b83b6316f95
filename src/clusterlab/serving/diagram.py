"""The serving chapter's diagrams: block tables and the batch, from real engine runs."""

from __future__ import annotations

import altair as alt
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.diagram import box_diagram


def block_table_diagram(tables: pd.DataFrame) -> alt.LayerChart:
    """Each request's block table as a row of boxes, shared blocks marked.

    Args:
        tables: ``cl.serving.measure.block_tables()`` rows, from a real run.
    """
    order = {r: k for k, r in enumerate(sorted(tables["request"].unique()))}
    nodes = [
        {
            "id": f"{t.request}{t.position}",
            "x": 1.2 + 1.1 * t.position,
            "y": 1.0 * order[t.request],
            "w": 1.0,
            "h": 0.8,
            "label": f"block {t.block} ({t.tokens} tok)",
            "kind": "shared by A and B" if t.shared else "its own",
        }
        for t in tables.itertuples()
    ]
    nodes += [
        {"id": f"req{r}", "x": 0.0, "y": 1.0 * k, "w": 1.0, "h": 0.8,
         "label": f"request {r}", "kind": "request"}
        for r, k in order.items()
    ]  # fmt: skip
    return box_diagram(
        pd.DataFrame(nodes),
        title="Block tables: each request's cache, one fixed-size block at a time",
        subtitle="a real engine run, 4 tokens a block: B starts with A's 8 tokens "
        "and points at A's two full blocks instead of computing them again",
        size=(640, 200),
        legend=True,
    )


def batch_diagram(trace: pd.DataFrame) -> alt.FacetChart:
    """The running batch over the engine's steps, one row per request, per policy.

    Args:
        trace: ``cl.serving.measure.batch_trace`` rows (``policy, request, step,
            phase``), one policy or several.
    """
    check_columns(trace, ["policy", "request", "step", "phase"])
    data = trace.assign(
        end=trace["step"] + 1, name="request " + trace["request"].astype(str)
    )
    colors = alt.Scale(
        domain=["waiting", "prefill", "decode"], range=["#8f8f8f", "#b86200", "#1f5fa8"]
    )
    return (
        alt.Chart(data)
        .mark_rect(stroke="white", strokeWidth=1)
        .encode(
            x=alt.X("step:Q", title="engine step"),
            x2="end:Q",
            y=alt.Y("name:N", title=None, sort=None),
            color=alt.Color("phase:N", scale=colors, title=None),
            tooltip=["policy", "request", "step", "phase"],
        )
        .properties(width=560, height=140)
        .facet(row=alt.Row("policy:N", title=None))
        .properties(
            title=alt.TitleParams(
                "The batch over the engine's steps: who runs, who waits",
                subtitle="a real run of the book's engine, at most 4 requests at "
                "once; grey: arrived and waiting for its first token",
            )
        )
    )


__all__ = ["batch_diagram", "block_table_diagram"]
