"""The serving-on-a-cluster chapter's diagram: the disaggregated pipeline, with
the bytes it ships."""

from __future__ import annotations

import altair as alt
import pandas as pd

from clusterlab.core.diagram import box_diagram


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
        size=(650, 220),
        legend=True,
    )


__all__ = ["disagg_diagram"]
