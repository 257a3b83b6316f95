"""The serving chapter's diagram: block tables of a real engine run."""

from __future__ import annotations

import altair as alt
import pandas as pd

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


__all__ = ["block_table_diagram"]
