"""The floating-point formats diagram: its fields are the formats' own bits."""

import math

import pytest
import torch

from clusterlab.viz.diagrams import precision


@pytest.mark.parametrize("name,dtype", precision.FORMATS)
def test_the_fields_add_up_to_the_format_and_its_step(name, dtype):
    nodes, _ = precision.format_bits_spec()
    fields = nodes.set_index("id")
    bits = [fields.loc[f"{name}_{p}", "bits"] for p in ("sign", "exponent", "mantissa")]
    info = torch.finfo(dtype)
    assert sum(bits) == info.bits
    assert 2.0 ** -bits[2] == info.eps
    assert f"eps 2^{round(math.log2(info.eps))}" in fields.loc[f"{name}_range", "label"]


def test_the_layouts_are_the_published_ones():
    got = {n: precision.format_bits(d) for n, d in precision.FORMATS}
    expect = {"fp32": (8, 23), "bf16": (8, 7), "fp16": (5, 10)}
    expect |= {"FP8 e4m3": (4, 3), "FP8 e5m2": (5, 2)}
    assert {n: (g["exponent"], g["mantissa"]) for n, g in got.items()} == expect
    assert got["FP8 e4m3"]["max"] == 448.0
