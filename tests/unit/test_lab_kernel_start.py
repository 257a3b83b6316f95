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


@pytest.mark.skipif(
    not Path("/proc/sys/net/ipv4/ip_local_port_range").exists(),
    reason="reads Linux's ephemeral port range",
)
def test_kernels_get_ports_below_the_ephemeral_range():
    from jupyter_client.connect import LocalPortCache

    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    cache = LocalPortCache()
    ports = {cache.find_available_port("127.0.0.1") for _ in range(20)}
    assert len(ports) == 20 and max(ports) < low, sorted(ports)
