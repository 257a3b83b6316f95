"""The bits of each floating-point format training uses, to scale.

``format_bits_spec`` draws the rows of ``cl.models.precision.format_table()``
(fp32, bf16, fp16 and the two FP8 formats, read from ``torch.finfo``) as rows
of boxes, sign, exponent and mantissa, one unit of width per bit, with each
format's largest value and epsilon beside it.
"""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.diagram import box_diagram, frame

TABLE_COLUMNS = ("format", "bits", "exponent_bits", "mantissa_bits", "max_value")


NAMES = {"fp8_e4m3": "FP8 e4m3", "fp8_e5m2": "FP8 e5m2"}


def format_bits_spec(table: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row of boxes per format; widths in bits.

    Args:
        table: ``cl.models.precision.format_table()`` (the default), or rows
            with the same columns.

    Returns:
        ``nodes``; each field box also carries ``bits``.
    """
    if table is None:
        from clusterlab.models.precision import format_table

        table = format_table()
    check_columns(table, (*TABLE_COLUMNS, "epsilon"), "table")
    nodes = []
    for row, f in enumerate(table.itertuples(index=False)):
        name, y, x = NAMES.get(f.format, f.format), row * 7, 0
        nodes.append(
            dict(id=f"{f.format}_name", x=-9, y=y, w=8, h=5, kind="label", label=name)
        )
        fields = (
            ("sign", 1),
            ("exponent", f.exponent_bits),
            ("mantissa", f.mantissa_bits),
        )
        for part, n in fields:
            text = "s" if part == "sign" else f"{part} {n}"
            if n <= 5 and part != "sign":
                text = f"{part[0]} {n}"
            box = dict(id=f"{f.format}_{part}", x=x, y=y, w=n, h=5, kind=part)
            nodes.append(dict(box, label=text, bits=int(n)))
            x += n
        eps = f"2^{round(math.log2(f.epsilon))}"
        nodes.append(
            dict(
                id=f"{f.format}_range",
                x=33,
                y=y,
                w=12,
                h=5,
                kind="label",
                label=f"max {f.max_value:.3g}, eps {eps}",
            )
        )
    return frame(nodes, ())


def format_bits_diagram(table: pd.DataFrame | None = None) -> alt.LayerChart:
    """The picture of :func:`format_bits_spec`."""
    return box_diagram(
        format_bits_spec(table),
        None,
        title="Floating-point formats, one box per field, one unit per bit",
        subtitle="exponent bits set the range; mantissa bits set the step (eps)",
        size=(470, 170),
        font_size=10,
        legend=True,
    )


__all__ = ["format_bits_diagram", "format_bits_spec"]
