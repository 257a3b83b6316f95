"""The guard of ``tests/unit/conftest.py``: a unit test that starts ranks fails."""

import subprocess
import sys

import pytest

import clusterlab as cl


def _noop(rank, world_size):
    return rank


def test_a_launch_in_a_unit_test_is_refused():
    with pytest.raises(RuntimeError, match="move this test to tests/distributed"):
        cl.launch(_noop, 2)


def test_torchrun_in_a_unit_test_is_refused():
    with pytest.raises(RuntimeError, match="it ran torchrun"):
        subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--help"])


def test_other_subprocesses_still_run():
    out = subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True)
    assert out.stdout.strip() == b"1"
