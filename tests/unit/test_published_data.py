"""The published tables in data/: columns, units in names, positive values, sources."""

import re
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
TABLES = {
    "gpu_specs": ["part", "bf16_dense_flops", "hbm_bandwidth_Bps", "tdp_W"],
    "interconnect_rates": ["link", "per_direction_Bps", "both_directions_Bps"],
    "collective_busbw_published": ["system", "op", "n_gpus", "busbw_Bps"],
    "matmul_achieved": ["part", "peak_flops", "achieved_flops"],
}
#: Endings that name a unit; every numeric column but counts must carry one.
UNIT_SUFFIXES = ("_Bps", "_flops", "_bytes", "_W", "_s")
COUNTS = {"n_gpus", "n_nodes"}


def _load(name):
    return pd.read_csv(ROOT / "data" / f"{name}.csv")


@pytest.mark.parametrize("name", TABLES)
def test_table_has_its_columns_and_sources(name):
    df = _load(name)
    assert set(TABLES[name]) <= set(df.columns)
    for col in ("source", "source_key", "source_date"):
        assert col in df.columns, f"{name} lacks {col}"
        assert df[col].notna().all() and (df[col].astype(str).str.len() > 0).all()
    assert df["source_key"].str.fullmatch(r"[a-z][a-z0-9_]*").all()
    assert df["source_date"].astype(str).str.fullmatch(r"(19|20)\d\d(-\d\d)?").all()


@pytest.mark.parametrize("name", TABLES)
def test_numbers_carry_units_and_are_positive(name):
    df = _load(name)
    numeric = [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c])]
    numeric = [c for c in numeric if c != "source_date"]
    assert numeric, f"{name} has no numeric column"
    for col in numeric:
        assert col in COUNTS or col.endswith(UNIT_SUFFIXES), f"{col}: unit in name?"
        values = df[col].dropna()
        assert (values > 0).all(), f"{name}.{col} has a value <= 0"


def test_every_source_key_is_cited_or_listed_for_the_bibliography():
    keys = set()
    for name in TABLES:
        keys |= set(_load(name)["source_key"])
    bib = (ROOT / "references.bib").read_text()
    known = set(re.findall(r"@\w+\{(\w+),", bib))
    pending = {  # keys whose BibTeX entries are being added to references.bib
        "scaling_book",
        "bekman_mle",
        "nvidia_h200",
        "nvidia_a100",
        "nvidia_dgx_h100",
        "aws_p5",
        "ieee8023ba",
    }
    assert keys <= known | pending, keys - known - pending


def test_both_directions_is_twice_per_direction():
    df = _load("interconnect_rates")
    ratio = df["both_directions_Bps"] / df["per_direction_Bps"]
    assert ratio.round(6).eq(2.0).all()
    nvlink4 = df[df["link"].str.startswith("NVLink 4")].iloc[0]
    assert nvlink4["both_directions_Bps"] == 900e9  # the datasheet's 900 GB/s
    assert nvlink4["per_direction_Bps"] == 450e9


def test_specs_are_in_plausible_ranges():
    specs = _load("gpu_specs").set_index("part")
    assert specs["bf16_dense_flops"].between(1e14, 1e16).all()  # 100 TFLOP/s–10 PFLOP/s
    assert specs["hbm_bandwidth_Bps"].between(1e12, 1e13).all()  # 1–10 TB/s
    assert specs.at["H100 SXM5", "hbm_bandwidth_Bps"] == 3.35e12
    # the PCIe part has the slower memory (claim S4)
    assert (
        specs.at["H100 PCIe", "hbm_bandwidth_Bps"]
        < specs.at["H100 SXM5", "hbm_bandwidth_Bps"]
    )
    got = _load("matmul_achieved")
    assert (got["achieved_flops"] < got["peak_flops"]).all()


def test_published_busbw_is_a_fraction_of_the_link_or_near_it():
    df = _load("collective_busbw_published")
    share = df["busbw_Bps"] / df["link_per_direction_Bps"]
    # above 1 only with in-switch reduction (NVLink SHARP), and never wildly
    assert share.between(0.2, 1.2).all(), share
    assert set(df["op"]) <= {
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "broadcast",
        "peer_copy",
    }
