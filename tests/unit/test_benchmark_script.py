"""``scripts/benchmark.py --test-command`` times the README's test command."""

import sys

import pytest

from book_helpers import script_module


def test_the_test_command_is_timed_and_its_budget_is_fifteen_minutes():
    bench = script_module("benchmark")
    seconds = bench.time_test_command(
        (sys.executable, "-c", "import time; time.sleep(0.2)")
    )
    assert 0.2 <= seconds < 10
    assert bench.TEST_BUDGET_S == 15 * 60
    assert bench.BUILD_BUDGET_S == 6 * 60 and bench.CHECK_BUDGET_S == 3 * 60


def test_a_failing_test_command_is_an_error_with_its_exit_status_and_output():
    bench = script_module("benchmark")
    failing = (sys.executable, "-c", "print('2 failed, 9 passed'); raise SystemExit(2)")
    with pytest.raises(
        RuntimeError, match=r"failed \(exit 2\)[\s\S]*2 failed, 9 passed"
    ):
        bench.time_test_command(failing)
