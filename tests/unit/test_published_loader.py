"""cl.published finds the tables of data/ in a checkout and inside a built wheel."""

import subprocess
import sys
import zipfile
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


def test_the_wheel_ships_the_tables(tmp_path):
    """A pip install from the repository (as on Colab) must include data/*.csv."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
        + ["-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("clusterlab-*.whl")
    shipped = {
        Path(n).name
        for n in zipfile.ZipFile(wheel).namelist()
        if n.startswith("clusterlab/_published/")
    }
    assert shipped == set(CSVS)
