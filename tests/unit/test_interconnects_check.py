"""The interconnects lab's exercise check, against its solution and wrong answers."""

import pytest

import clusterlab as cl


def test_the_reference_ports_needed_passes(capsys):
    assert (
        cl.interconnects.check.ports_needed(cl.interconnects.answer.ports_needed)
        is True
    )
    assert "\u2714 ports_needed" in capsys.readouterr().out


def test_a_stub_is_not_attempted(capsys):
    def stub(n_params, tokens_per_gpu, network, max_share=0.10):
        raise NotImplementedError

    assert cl.interconnects.check.ports_needed(stub) is False
    assert "not attempted" in capsys.readouterr().out


def test_ports_needed_fails_when_it_returns_one_port_too_many():
    def one_more(*args):
        got = cl.interconnects.answer.ports_needed(*args)
        return None if got is None else got + 1

    with pytest.raises(AssertionError, match="fewest"):
        cl.interconnects.check.ports_needed(one_more)


def test_ports_needed_fails_when_it_never_says_none():
    def always_eight(*args):
        return cl.interconnects.answer.ports_needed(*args) or 8

    with pytest.raises(AssertionError, match="return None"):
        cl.interconnects.check.ports_needed(always_eight)


def test_ports_needed_fails_when_it_counts_overlap():
    def with_overlap(n_params, tokens, network, max_share=0.10, nodes=16):
        ic = cl.models.interconnects
        c = ic.compute_time(n_params, tokens, ic.h100_peak_flops(), ic.default_mfu())
        for ports in range(1, 9):
            m = ic.cluster_allreduce_time(2 * n_params, network, nodes, 8, ports)
            if 1 - c / ic.step_time(c, m, overlap=2 / 3) <= max_share:
                return ports
        return None

    with pytest.raises(AssertionError, match="no overlap"):
        cl.interconnects.check.ports_needed(with_overlap)


def test_ports_needed_rejects_a_non_function():
    with pytest.raises(ValueError, match="fn="):
        cl.interconnects.check.ports_needed(3)
