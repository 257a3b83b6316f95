"""Each exercise check against the reference solution, a stub and wrong answers."""

import pytest
import torch
import torch.distributed as dist

import clusterlab as cl

pytestmark = pytest.mark.dist


def test_reference_solution_passes(capsys):
    assert cl.check.reduce_then_broadcast(cl.solutions.reduce_then_broadcast) is True
    assert "\u2714 reduce_then_broadcast" in capsys.readouterr().out


def test_a_stub_is_not_attempted(capsys):
    def stub(tensor, rank, world_size):
        raise NotImplementedError

    assert cl.check.reduce_then_broadcast(stub) is False
    assert "not attempted" in capsys.readouterr().out


def test_an_answer_that_forgets_the_broadcast_fails_with_a_hint():
    def reduce_only(tensor, rank, world_size):
        if rank == 0:
            incoming = torch.empty_like(tensor)
            for src in range(1, world_size):
                dist.recv(incoming, src)
                tensor += incoming
        else:
            dist.send(tensor, 0)
        return tensor

    with pytest.raises(AssertionError, match="did rank 0 send the total back"):
        cl.check.reduce_then_broadcast(reduce_only)


def test_a_deadlocked_answer_becomes_a_hint_not_a_hang(monkeypatch):
    monkeypatch.setattr(cl.check, "CHECK_TIMEOUT_S", 2.0)

    def deadlock(tensor, rank, world_size):
        dist.recv(tensor, (rank + 1) % world_size)  # everyone waits, nobody sends
        return tensor

    with pytest.raises(AssertionError, match="deadlock"):
        cl.check.reduce_then_broadcast(deadlock, world_sizes=(2,))


def test_the_check_needs_a_function():
    with pytest.raises(ValueError, match="fn="):
        cl.check.reduce_then_broadcast(None)
