"""The floating-point formats diagram: its fields are the formats' own bits."""

import math

import pytest

import clusterlab as cl
from clusterlab.precision import diagram as precision

TABLE = cl.models.precision.format_table()


@pytest.mark.parametrize("row", TABLE.to_dict("records"), ids=lambda r: r["format"])
def test_the_fields_add_up_to_the_format_and_its_step(row):
    fields = precision.format_bits_spec().set_index("id")
    name = row["format"]
    bits = [fields.loc[f"{name}_{p}", "bits"] for p in ("sign", "exponent", "mantissa")]
    assert sum(bits) == row["bits"]
    assert 2.0 ** -bits[2] == row["epsilon"]
    label = fields.loc[f"{name}_range", "label"]
    assert f"eps 2^{round(math.log2(row['epsilon']))}" in label


def test_the_layouts_are_the_published_ones():
    got = TABLE.set_index("format")[["exponent_bits", "mantissa_bits"]]
    expect = {"fp32": (8, 23), "bf16": (8, 7), "fp16": (5, 10)}
    expect |= {"fp8_e4m3": (4, 3), "fp8_e5m2": (5, 2)}
    assert {k: tuple(v) for k, v in got.iterrows()} == expect


def test_a_miscounted_table_draws_a_field_of_the_wrong_width():
    wrong = TABLE.assign(mantissa_bits=TABLE["mantissa_bits"] + 1)
    fields = precision.format_bits_spec(wrong).set_index("id")
    assert fields.loc["bf16_mantissa", "bits"] == 8
    assert fields.loc["bf16_mantissa", "label"] == "mantissa 8"
