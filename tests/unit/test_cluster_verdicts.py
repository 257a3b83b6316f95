"""The network claims' checks fail on wrong inputs, and the fallback is the record."""

from __future__ import annotations

import pandas as pd
import pytest

from clusterlab.cluster import recorded, verdicts
from clusterlab.cluster.support import FORCE_FALLBACK


def _runs(name):
    return recorded.recorded(name)


def test_the_recorded_link_run_passes_its_check():
    fit = verdicts.check_link_fit(_runs("link_sizes"))
    assert set(fit["rate_mbit"]) == {50, 200}


def test_a_run_slower_than_its_link_rate_fails_the_beta_check():
    df = _runs("link_sizes")
    slow = df.assign(seconds=df["seconds"] * 1.3, busbw_GBps=df["busbw_GBps"] / 1.3)
    with pytest.raises(AssertionError, match="beta does not match"):
        verdicts.check_link_fit(slow)


def test_a_run_labelled_with_the_wrong_rate_fails_the_beta_check():
    df = _runs("link_sizes")
    wrong = df.assign(rate_mbit=df["rate_mbit"].map({50: 100, 200: 400}))
    with pytest.raises(AssertionError):
        verdicts.check_link_fit(wrong)


def test_the_hierarchy_check_passes_the_record_and_fails_wrong_inputs():
    df = _runs("hierarchy")
    model = verdicts.hierarchy_model_ratio(2, 2)
    assert model == pytest.approx(1.5)
    assert verdicts.check_hierarchy(df, model)["ratio"] >= 1.2
    with pytest.raises(AssertionError):
        verdicts.check_hierarchy(df, 1.0)  # a model that predicts no gain
    same = df.assign(
        seconds=df.groupby("rep")["seconds"].transform("max")
    )  # hierarchical no faster than the ring
    with pytest.raises(AssertionError):
        verdicts.check_hierarchy(same, model)


def test_forcing_the_fallback_returns_the_recorded_run_with_its_provenance(
    monkeypatch,
):
    monkeypatch.setenv(FORCE_FALLBACK, "1")
    df, note = recorded.measure_or_recorded("hierarchy")
    assert {"machine", "date", "command", "source"} <= set(df.columns)
    assert "recorded" in note and df["command"].iloc[0] in note
    with pytest.raises(ValueError, match="experiment='nope'"):
        recorded.recorded("nope")
    assert isinstance(df, pd.DataFrame)


def test_the_recorded_run_is_decided_by_the_same_check_and_a_wrong_model_fails(
    monkeypatch,
):
    monkeypatch.setenv(FORCE_FALLBACK, "1")
    df, h, note = recorded.measure_and_check(
        "hierarchy", lambda d: verdicts.check_hierarchy(d, 1.5)
    )
    assert h["ok"] and "recorded" in note
    with pytest.raises(AssertionError, match="outside"):
        recorded.measure_and_check(
            "hierarchy", lambda d: verdicts.check_hierarchy(d, 1.0)
        )
