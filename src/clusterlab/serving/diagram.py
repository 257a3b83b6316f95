"""The serving chapters' diagrams: block tables of a real engine run, and the
disaggregated pipeline with the bytes it ships."""

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


def disagg_diagram(
    kv_bytes_per_token: float, prompt_tokens: int, transfer_s: float, link: str
) -> alt.LayerChart:
    """The disaggregated pipeline: prefill rank, the KV cache sent, decode rank.

    Args:
        kv_bytes_per_token: the model's KV bytes per token
            (``cl.models.serving.kv_bytes_per_token``).
        prompt_tokens: the prompt drawn, >= 1.
        transfer_s: its transfer's time over ``link``
            (``cl.models.serving.kv_transfer_s``).
        link: the link's name, for the arrow's label.
    """
    from clusterlab.core.diagram import size_label

    shipped = kv_bytes_per_token * prompt_tokens
    nodes = pd.DataFrame(
        [
            ("req", 0.0, 0.4, 1.5, 0.9, "request", "request"),
            ("pre", 2.7, 0.4, 2.2, 0.9, "prefill rank", "prefill"),
            ("dec", 8.3, 0.4, 2.2, 0.9, "decode rank", "decode"),
            ("out", 11.7, 0.4, 1.5, 0.9, "tokens", "request"),
            ("one", 2.7, 2.2, 7.8, 0.9,
             "co-located: one engine, prefill chunks inside decoding steps",
             "co-located"),
        ],
        columns=["id", "x", "y", "w", "h", "label", "kind"],
    )  # fmt: skip
    links = pd.DataFrame(
        [
            ("req", "pre", "", "request"),
            ("pre", "dec", f"KV cache, {size_label(shipped)}", "kv"),
            ("dec", "out", "", "request"),
        ],
        columns=["src", "dst", "label", "kind"],
    )  # fmt: skip
    return box_diagram(
        nodes,
        links,
        title="Disaggregated serving: the prompt's KV cache crosses a link once",
        subtitle=f"{prompt_tokens:,} prompt tokens at "
        f"{size_label(kv_bytes_per_token)} each: {transfer_s * 1e3:.1f} ms on "
        f"{link}; below, the co-located engine it replaces",
        size=(680, 220),
        legend=True,
    )


__all__ = ["block_table_diagram", "disagg_diagram"]
