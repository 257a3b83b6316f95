"""cl.published finds the tables of data/ in a checkout and inside a built wheel."""

from pathlib import Path

import pytest

import clusterlab as cl

ROOT = Path(__file__).resolve().parents[2]
CSVS = sorted(p.name for p in (ROOT / "data").glob("*.csv"))


def test_every_csv_of_data_is_a_published_table():
    assert cl.published.names() == [n.removesuffix(".csv") for n in CSVS]


@pytest.mark.parametrize("name", [n.removesuffix(".csv") for n in CSVS])
def test_each_table_loads_with_rows_and_a_source(name):
    df = cl.published.load(name)
    assert len(df) > 0 and "source" in df.columns


def test_an_unknown_table_is_a_clear_error():
    with pytest.raises(ValueError, match="name='no_such_table'.*choose one of"):
        cl.published.load("no_such_table")


def test_value_reads_one_figure_of_one_row():
    peak = cl.published.value("gpu_specs", "bf16_dense_flops", part="H100 SXM5")
    df = cl.published.load("gpu_specs").set_index("part")
    assert peak == df.loc["H100 SXM5", "bf16_dense_flops"]
    assert isinstance(peak, float)


def test_row_refuses_a_match_that_is_not_one_row():
    with pytest.raises(ValueError, match="picks 0 rows"):
        cl.published.row("gpu_specs", part="no such GPU")
    with pytest.raises(ValueError, match="not columns"):
        cl.published.row("gpu_specs", colour="green")
    with pytest.raises(ValueError, match="column='nope'"):
        cl.published.value("gpu_specs", "nope", part="H100 SXM5")


def test_load_returns_a_copy_callers_may_change():
    df = cl.published.load("gpu_specs")
    df.loc[:, "tdp_W"] = 0
    assert cl.published.value("gpu_specs", "tdp_W", part="H100 SXM5") > 0
