"""The topic template stays working: its own tests run here."""

import importlib

import pytest

template_tests = importlib.import_module("clusterlab._topic_template.test_template")


@pytest.mark.parametrize(
    "name", [n for n in dir(template_tests) if n.startswith("test_")]
)
def test_the_template_passes_its_own_tests(name):
    getattr(template_tests, name)()
