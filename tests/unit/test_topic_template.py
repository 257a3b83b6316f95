"""The topic template stays working: its own tests run here, and its ranks run."""

import importlib

import pytest

template_tests = importlib.import_module("clusterlab._topic_template.test_template")


@pytest.mark.parametrize(
    "name", [n for n in dir(template_tests) if n.startswith("test_")]
)
def test_the_template_passes_its_own_tests(name):
    getattr(template_tests, name)()


def test_the_template_measures_on_real_ranks():
    from clusterlab._topic_template.measure import measure_total

    df = measure_total(2, value=1.0)
    assert df["total"].tolist() == [3.0, 3.0]
