"""make colab-check: its pins parse, name Colab's versions, and it runs every lab."""

import pytest

from book_helpers import script_module

colab = script_module("colab_check")


def test_the_pins_parse_and_name_colabs_versions():
    pins = colab.read_pins()
    assert pins["python"] == "3.13" and pins["date"].startswith("20")
    packages = pins["packages"]
    for name, version in {
        "torch": "2.11.0",
        "altair": "5.5.0",
        "ipywidgets": "7.7.1",
    }.items():
        assert packages[name] == version
    assert {"numpy", "pandas", "nbval", "pytest", "ipykernel"} <= set(packages)


def test_the_check_runs_every_lab():
    assert colab.uncovered(colab.labs_to_run()) == []
    assert len(colab.labs_to_run()) == len(colab.LABS) > 20


def test_a_lab_left_out_is_caught():
    run = colab.labs_to_run()[1:]
    assert colab.uncovered(run) == [colab.LABS[0].name]


def test_a_malformed_pin_is_an_error(tmp_path):
    bad = tmp_path / "pins.txt"
    bad.write_text("# python: 3.13\n# date: 2026-08-19\ntorch>=2.11\n")
    with pytest.raises(ValueError, match="NAME==VERSION"):
        colab.read_pins(bad)
    bad.write_text("torch==2.11.0\n")
    with pytest.raises(ValueError, match="python"):
        colab.read_pins(bad)
