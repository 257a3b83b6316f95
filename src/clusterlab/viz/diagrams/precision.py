"""The bits of each floating-point format training uses, to scale.

``format_bits_spec`` draws fp32, bf16, fp16 and the two FP8 formats as rows of
boxes (sign, exponent, mantissa), one unit of width per bit. The bit counts,
the largest value and the epsilon are read from ``torch.finfo``, not typed:
the mantissa has ``-log2(eps)`` bits and the exponent the rest but the sign.
"""

from __future__ import annotations

import math

import altair as alt
import pandas as pd
import torch

from ._base import box_diagram, frame

__all__ = ["FORMATS", "format_bits", "format_bits_diagram", "format_bits_spec"]

#: The formats drawn, top to bottom, with the names the book uses.
FORMATS = (
    ("fp32", torch.float32),
    ("bf16", torch.bfloat16),
    ("fp16", torch.float16),
    ("FP8 e4m3", torch.float8_e4m3fn),
    ("FP8 e5m2", torch.float8_e5m2),
)


def format_bits(dtype: torch.dtype) -> dict:
    """Sign, exponent and mantissa bits, largest value and epsilon of ``dtype``."""
    info = torch.finfo(dtype)
    mantissa = round(-math.log2(info.eps))
    return dict(
        bits=info.bits,
        sign=1,
        exponent=info.bits - 1 - mantissa,
        mantissa=mantissa,
        max=float(info.max),
        eps=float(info.eps),
    )


def format_bits_spec() -> tuple[pd.DataFrame, None]:
    """One row of boxes per format; widths in bits.

    Returns:
        ``(nodes, None)``: no links. Each field box also carries ``bits``.
    """
    nodes = []
    for row, (name, dtype) in enumerate(FORMATS):
        f = format_bits(dtype)
        y, x = row * 7, 0
        nodes.append(
            dict(id=f"{name}_name", x=-9, y=y, w=8, h=5, kind="label", label=name)
        )
        for part in ("sign", "exponent", "mantissa"):
            n = f[part]
            text = "s" if part == "sign" else f"{part} {n}"
            if n <= 4 and part != "sign":
                text = f"{part[0]} {n}"
            nodes.append(
                dict(
                    id=f"{name}_{part}",
                    x=x,
                    y=y,
                    w=n,
                    h=5,
                    kind=part,
                    label=text,
                    bits=n,
                )
            )
            x += n
        nodes.append(
            dict(
                id=f"{name}_range",
                x=33,
                y=y,
                w=14,
                h=5,
                kind="label",
                label=f"max {f['max']:.3g}, eps 2^{round(math.log2(f['eps']))}",
            )
        )
    return frame(nodes, ()), None


def format_bits_diagram() -> alt.LayerChart:
    """The picture of :func:`format_bits_spec`."""
    nodes, links = format_bits_spec()
    return box_diagram(
        nodes,
        links,
        title="Five floating-point formats, one box per field, one unit per bit",
        subtitle="exponent bits set the range; mantissa bits set the step (eps)",
        size=(620, 190),
        legend=True,
    )
