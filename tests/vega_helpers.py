"""Run Vega-Lite specs in Vega itself (vl-convert, no browser) and read the result.

Tests of the charts that compute a model in the page, or that must draw data
marks, share these readers of a Vega scenegraph.
"""

from __future__ import annotations

import pandas as pd
import vl_convert


def _texts(node) -> list[str]:
    """The text items of the first text mark in a Vega scenegraph."""
    if isinstance(node, dict):
        if node.get("marktype") == "text":
            return [item["text"] for item in node.get("items", [])]
        for child in node.get("items", []):
            found = _texts(child)
            if found:
                return found
    return []


def scene_texts(spec: dict) -> list[str]:
    """The texts the spec's first text mark draws, in Vega's order."""
    return _texts(vl_convert.vegalite_to_scenegraph(spec)["scenegraph"])


def data_marks(node, kinds=("line", "symbol")) -> int:
    """Data marks drawn: items of marks of ``kinds`` in a Vega scenegraph."""
    found = 0
    if isinstance(node, dict):
        if node.get("marktype") in kinds and node.get("role") == "mark":
            found += len(node.get("items", []))
        for value in node.values():
            found += data_marks(value, kinds)
    elif isinstance(node, list):
        found += sum(data_marks(v, kinds) for v in node)
    return found


def vega_eval(calcs, rows, params=None) -> pd.DataFrame:
    """Run ``calculate`` transforms in Vega over ``rows``; return their fields.

    Args:
        calcs: the transforms, in order, as in a spec (``{"calculate", "as"}``).
        rows: the data, a list of dicts (``datum.<key>`` in the expressions).
        params: parameter values the expressions read by name.

    Returns:
        One row per input row, in order, one column per ``as`` field (floats).
    """
    fields = [c["as"] for c in calcs]
    values = [{**row, "__i": i} for i, row in enumerate(rows)]
    joined = " + '|' + ".join(["datum.__i", *(f"('' + datum['{f}'])" for f in fields)])
    spec = {
        "data": {"values": values},
        "params": [{"name": k, "value": v} for k, v in (params or {}).items()],
        "transform": [*calcs, {"calculate": joined, "as": "__row"}],
        "mark": "text",
        "encoding": {"text": {"field": "__row", "type": "nominal"}},
    }
    texts = scene_texts(spec)
    assert len(texts) == len(rows), (len(texts), len(rows))
    out = {}
    for text in texts:
        i, *got = text.split("|")
        out[int(i)] = [float(g) for g in got]
    return pd.DataFrame([out[i] for i in range(len(rows))], columns=fields)
