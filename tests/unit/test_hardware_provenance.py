"""Every hardware, link and sweep row says where it comes from, when, and, for a
link rate, whether the source counts it per direction or over both directions."""

import re
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The tables of hardware figures, link rates and published all-reduce sweeps.
HARDWARE_TABLES = (
    "gpu_specs",
    "interconnect_rates",
    "collective_busbw_published",
    "link_assumptions",
    "matmul_achieved",
    "power",
)
#: Tables whose rows are link rates: each says how its source counts the rate.
LINK_RATE_TABLES = ("interconnect_rates",)
DIRECTIONS = ("per direction", "both directions")
_DATE = re.compile(r"(19|20)\d\d(-\d\d)?")


def provenance_problems(df: pd.DataFrame, link_rates: bool = False) -> list[str]:
    """Rows of a published table that lack a source, a date or a direction.

    Args:
        df: the table (``source`` and ``source_date`` columns; for link rates
            also ``quoted_direction``).
        link_rates: True for a table of link rates.

    Returns:
        One sentence per missing item, naming the row by its first column; a
        column of link rates whose name does not say its direction is one too.
    """
    problems = []
    key = df.columns[0]
    for col in ("source", "source_date") + (
        ("quoted_direction",) if link_rates else ()
    ):
        if col not in df.columns:
            problems.append(f"no {col} column")
    for _, r in df.iterrows():
        name = r[key]
        source = r.get("source")
        if not isinstance(source, str) or not source.strip():
            problems.append(f"{name!r}: no source")
        date = r.get("source_date")
        if pd.isna(date) or not _DATE.fullmatch(str(date)):
            problems.append(f"{name!r}: no date (source_date={date!r})")
        if link_rates and "quoted_direction" in df.columns:
            if r["quoted_direction"] not in DIRECTIONS:
                got = r["quoted_direction"]
                problems.append(f"{name!r}: no direction (quoted_direction={got!r})")
    for col in df.columns:
        rate = col.endswith("_Bps") and ("link" in col or "nvlink" in col)
        if rate and not ("per_direction" in col or "both_directions" in col):
            problems.append(f"column {col!r} is a link rate without its direction")
    return problems


def _load(name):
    return pd.read_csv(ROOT / "data" / f"{name}.csv")


@pytest.mark.parametrize("name", HARDWARE_TABLES)
def test_every_hardware_row_has_a_source_a_date_and_a_direction(name):
    problems = provenance_problems(_load(name), link_rates=name in LINK_RATE_TABLES)
    assert not problems, problems


def test_every_next_generation_row_is_there():
    parts = set(_load("gpu_specs")["part"])
    assert {"B200", "B300", "GB200", "GB300", "MI300X", "MI355X"} <= parts
    links = _load("interconnect_rates")["link"]
    for start in ("NVLink 5 (B200", "NVLink 5 (GB200 NVL72", "InfiniBand XDR"):
        assert links.str.startswith(start).any(), start


def _good_links():
    return _load("interconnect_rates").head(3).copy()


@pytest.mark.parametrize(
    "column, bad, says",
    [
        ("source", None, "no source"),
        ("source", "  ", "no source"),
        ("source_date", None, "no date"),
        ("source_date", "recently", "no date"),
        ("quoted_direction", None, "no direction"),
        ("quoted_direction", "bidirectional", "no direction"),
    ],
)
def test_the_check_fails_on_a_row_missing_each(column, bad, says):
    assert provenance_problems(_good_links(), link_rates=True) == []
    df = _good_links().astype({column: object})
    df.loc[1, column] = bad
    problems = provenance_problems(df, link_rates=True)
    assert len(problems) == 1 and says in problems[0], problems
    assert df.loc[1, "link"] in problems[0]  # it names the row


def test_the_check_fails_on_a_missing_column_or_an_undirected_rate():
    df = _good_links().drop(columns="quoted_direction")
    assert "no quoted_direction column" in provenance_problems(df, link_rates=True)
    sweep = _load("collective_busbw_published").head(2)
    assert provenance_problems(sweep) == []
    undirected = sweep.rename(columns={"link_per_direction_Bps": "link_Bps"})
    assert provenance_problems(undirected) == [
        "column 'link_Bps' is a link rate without its direction"
    ]
