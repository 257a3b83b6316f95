"""The labs' kernel start: a kernel that dies before its first reply is started
once more, and only once; other errors are not retried."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def wrapper():
    spec = importlib.util.spec_from_file_location(
        "labs_conftest", ROOT / "labs" / "conftest.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._start_again_if_it_died


def starter(errors):
    calls = []

    def start(**kwargs):
        calls.append(kwargs)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return "kernel"

    return start, calls


def test_a_kernel_that_died_at_start_is_started_again():
    start, calls = starter([RuntimeError("Kernel died before replying to kernel_info")])
    assert wrapper()(start)(kernel_name="python3") == "kernel"
    assert len(calls) == 2


def test_a_kernel_that_dies_twice_fails_and_other_errors_are_not_retried():
    died = RuntimeError("Kernel died before replying to kernel_info")
    start, calls = starter([died, died])
    with pytest.raises(RuntimeError, match="died"):
        wrapper()(start)()
    start, calls = starter([RuntimeError("no such kernel")])
    with pytest.raises(RuntimeError, match="no such kernel"):
        wrapper()(start)()
    assert len(calls) == 1
