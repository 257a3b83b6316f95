"""Up-front cluster cost, reserved against on-demand, failures, and the price data."""

import math
import re
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import clusterlab as cl
from clusterlab.models import cluster_capex as cc
from clusterlab.models import economics as eco
from clusterlab.models import io_budget as io
from clusterlab.models import useful_hours as uh

ROOT = Path(__file__).resolve().parents[2]
TABLES = ["prices", "power", "economics_assumptions", "cluster_capex_published"]
TABLES += ["cpu_core"]


# --- the data -------------------------------------------------------------------


@pytest.mark.parametrize("name", TABLES)
def test_every_row_says_where_it_comes_from(name):
    df = cl.published.load(name)
    for col in ("source", "source_key", "source_date"):
        assert df[col].notna().all() and (df[col].astype(str).str.len() > 0).all()
    assert df["source_date"].astype(str).str.fullmatch(r"20\d\d(-\d\d)?").all()
    bib = (ROOT / "references.bib").read_text()
    known = set(re.findall(r"@\w+\{(\w+),", bib)) | {"assumption"}
    assert set(df["source_key"]) <= known, set(df["source_key"]) - known
    # an assumption says so, and gives its reasoning
    assumed = df[df["source_key"] == "assumption"]
    assert assumed["source"].str.startswith(("assumption: ", "claim ")).all()


def test_prices_say_what_where_and_per_what():
    df = cl.published.load("prices")
    assert df["item"].is_unique
    assert (df["usd"] > 0).all()
    for col in ("what", "where", "per", "conditions"):
        assert df[col].notna().all(), col
    assert "trade press" not in " ".join(df["source"]).lower()


def test_the_published_cost_model_adds_up():
    df = cl.published.load("cluster_capex_published")
    terms = ["servers_usd", "switches_usd", "cables_usd", "facility_ops_usd"]
    assert (df[terms].sum(axis=1) == df["total_usd"]).all()


# --- E1: what 512 H100 cost up front --------------------------------------------


def test_fabric_follows_the_switch_layers():
    assert cc.fabric_layers(64) == 1 and cc.fabric_layers(65) == 2
    assert cc.fabric_layers(2048) == 2 and cc.fabric_layers(2049) == 3
    f = cc.fabric_capex(512)
    assert (f["layers"], f["switches"]) == (1, 8)
    assert f["total_usd"] == f["switches_usd"] + f["cables_usd"]
    with pytest.raises(ValueError, match="n_gpus=12"):
        cc.fabric_capex(12)


def test_the_capex_backtest_passes_the_model(capsys):
    assert cl.economics.check.capex_backtest(cc.fabric_capex) is True
    assert "6 published clusters" in capsys.readouterr().out


def test_the_capex_backtest_fails_a_wrong_price_and_a_wrong_model():
    def nvidia_switches(n):  # the dearer switch row: not the cost model's price
        return cc.fabric_capex(
            n,
            switch_usd=cl.published.value(
                "prices", "usd", item="ib_switch_64x400g_nvidia"
            ),
        )

    with pytest.raises(AssertionError, match="switches_usd"):
        cl.economics.check.capex_backtest(nvidia_switches)

    def one_layer_always(n):  # forgets the spine switches of larger fabrics
        f = cc.fabric_capex(n)
        return {**f, "switches": math.ceil(n / 64)}

    with pytest.raises(AssertionError, match="switches"):
        cl.economics.check.capex_backtest(one_layer_always)


def test_e1_capex_from_the_rows():
    """E1's $8-12M for 512 H100 is below even the cheapest published estimate."""
    table = cc.e1_capex_table(512)
    colocated = table[~table["with_facility"]]
    cheapest = colocated["total"].min()
    dgx_low = cl.published.value("prices", "usd", item="dgx_h100_low")
    assert cheapest == pytest.approx(
        64 * dgx_low + cc.fabric_capex(512)["total_usd"] + 512 * 8 * 250
    )
    assert cheapest > 12e6
    boards = 512 * cl.published.value("prices", "usd", item="h100_board_low")
    assert boards > 12e6  # the GPUs alone, before any server
    hgx = cc.cluster_capex(512, include_facility=False)
    pub = cl.published.row("cluster_capex_published", n_gpus=512)
    assert hgx["servers"] + hgx["fabric"] == pytest.approx(
        pub["servers_usd"] + pub["switches_usd"] + pub["cables_usd"]
    )
    assert hgx["per_gpu"] == pytest.approx(
        eco.DEFAULTS["capex_per_gpu"]
        + eco.DEFAULTS["fabric_per_gpu"]
        + eco.DEFAULTS["storage_per_gpu"]
    )


def test_e1_cloud_half_from_the_rows():
    prices = eco.cloud_prices().set_index("item")["usd"]
    assert 1.9 <= prices["h100_listings_low"] < prices["h100_listings_high"] <= 3.0
    assert prices["h100_sxm_aws_p5"] > 2 * prices["h100_listings_high"]


# --- reserved against on-demand ---------------------------------------------------


PRICES = {"on_demand_price": 4.0, "reserved_price": 2.5}


def test_reserved_capacity_costs_the_same_at_0_and_100_percent_use():
    idle = uh.cloud_hourly(0.0, **PRICES, reserved_fraction=1.0)
    busy = uh.cloud_hourly(1.0, **PRICES, reserved_fraction=1.0)
    assert idle["total"] == busy["total"] == pytest.approx(2.5)
    assert idle["per_useful_hour"] == math.inf
    # on demand, nothing is paid while idle
    assert uh.cloud_hourly(0.0, **PRICES)["total"] == 0.0
    assert uh.cloud_hourly(0.5, **PRICES)["per_useful_hour"] == pytest.approx(4.0)


@given(st.floats(0.01, 1.0), st.floats(0.0, 1.0))
def test_a_mix_costs_between_its_parts(u, f):
    mix = uh.cloud_hourly(u, **PRICES, reserved_fraction=f)["per_useful_hour"]
    parts = [
        uh.cloud_hourly(u, **PRICES, reserved_fraction=x)["per_useful_hour"]
        for x in (0.0, 1.0)
    ]
    assert min(parts) - 1e-9 <= mix <= max(parts) + 1e-9


# --- failures ---------------------------------------------------------------------


def test_cost_per_kept_hour_is_cost_over_goodput():
    assert uh.cost_after_failures(3.0, 0.75) == pytest.approx(4.0)
    with pytest.raises(ValueError, match="goodput_fraction"):
        uh.cost_after_failures(3.0, 0.0)
    g = uh.cluster_goodput(512, 1e8, 60.0, 600.0)
    assert g["goodput"] == pytest.approx(
        cl.models.checkpointing.goodput(g["interval_s"], 60.0, 1e8 / 512, 600.0)
    )
    opts = uh.cost_options(0.8, 0.9, **PRICES).set_index("option")
    assert (opts["per_kept_hour"] == opts["per_useful_hour"] / 0.9).all()
    assert opts.at["reserved", "per_useful_hour"] == pytest.approx(2.5 / 0.8)
    assert opts.at["owned", "per_useful_hour"] == pytest.approx(
        eco.useful_hour_cost(0.8)
    )


def test_more_gpus_lose_more_to_failures():
    small = uh.cluster_goodput(512, 1e8, 60.0)["goodput"]
    large = uh.cluster_goodput(16384, 1e8, 60.0)["goodput"]
    assert large < small < 1.0


# --- W5: one budget, two fleets ---------------------------------------------------


def test_w5_fleets_by_hand():
    # $73,000 a month buys 10 nodes at $10/h or 100 at $1/h; 1e15 bytes at 1e9 B/s.
    df = io.same_budget_fleets(
        73_000,
        data_bytes=1e15,
        gpu_node_price_per_hour=10.0,
        cpu_node_price_per_hour=1.0,
        gpu_node_io_Bps=1e9,
        cpu_node_io_Bps=1e9,
    ).set_index("fleet")
    assert df.at["GPU", "nodes"] == 10 and df.at["CPU", "nodes"] == 100
    assert df.at["GPU", "hours"] == pytest.approx(1e15 / 1e10 / 3600)
    assert df.attrs["cpu_speedup"] == pytest.approx(10.0)


def test_w5_defaults_come_from_rows_and_a_tiny_budget_is_refused():
    df = io.same_budget_fleets(500_000).set_index("fleet")
    assert df.at["GPU", "node_price"] == pytest.approx(8 * eco.cloud_price())
    assert df.at["CPU", "node_price"] == cl.published.value(
        "prices", "usd", item="cpu_node_32core_hyperstack"
    )
    with pytest.raises(ValueError, match="budget_per_month"):
        io.same_budget_fleets(100.0)


def test_capex_chart_draws_the_table():
    spec = cl.economics.chart.capex_chart(cc.e1_capex_table()).to_dict()
    assert isinstance(
        pd.DataFrame(spec["datasets"][next(iter(spec["datasets"]))]), pd.DataFrame
    )
