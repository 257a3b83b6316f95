"""Each exercise check against the reference solution, a stub and wrong answers."""

import pytest
import torch
import torch.distributed as dist

import clusterlab as cl

pytestmark = pytest.mark.dist


def test_reference_solution_passes(capsys):
    assert (
        cl.message_passing.check.reduce_then_broadcast(
            cl.message_passing.answer.reduce_then_broadcast
        )
        is True
    )
    assert "\u2714 reduce_then_broadcast" in capsys.readouterr().out


def test_a_stub_is_not_attempted(capsys):
    def stub(tensor, rank, world_size):
        raise NotImplementedError

    assert cl.message_passing.check.reduce_then_broadcast(stub) is False
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
        cl.message_passing.check.reduce_then_broadcast(reduce_only)


def test_a_deadlocked_answer_becomes_a_hint_not_a_hang(monkeypatch):
    monkeypatch.setattr(cl.core.checks, "CHECK_TIMEOUT_S", 2.0)

    def deadlock(tensor, rank, world_size):
        dist.recv(tensor, (rank + 1) % world_size)  # everyone waits, nobody sends
        return tensor

    with pytest.raises(AssertionError, match="deadlock"):
        cl.message_passing.check.reduce_then_broadcast(deadlock, world_sizes=(2,))


def test_the_check_needs_a_function():
    with pytest.raises(ValueError, match="fn="):
        cl.message_passing.check.reduce_then_broadcast(None)


def test_reduce_then_broadcast_fails_when_it_calls_all_reduce():
    def with_all_reduce(tensor, rank, world_size):
        dist.all_reduce(tensor)  # the right sum, by the collective it should build
        return tensor

    with pytest.raises(AssertionError, match=r"called dist\.all_reduce.*send"):
        cl.message_passing.check.reduce_then_broadcast(
            with_all_reduce, world_sizes=(2,)
        )


def test_reduce_then_broadcast_fails_when_it_uses_reduce_and_broadcast():
    def reduce_then_bcast(tensor, rank, world_size):
        dist.reduce(tensor, dst=0)
        dist.broadcast(tensor, src=0)
        return tensor

    with pytest.raises(AssertionError, match=r"dist\.broadcast, dist\.reduce"):
        cl.message_passing.check.reduce_then_broadcast(
            reduce_then_bcast, world_sizes=(2,)
        )


def test_reduce_then_broadcast_fails_when_a_collective_was_imported_by_name():
    from torch.distributed import all_reduce  # bound before the ranks start

    def imported(tensor, rank, world_size):
        all_reduce(tensor)
        return tensor

    assert cl.message_passing.check.collectives_in_source(imported) == ["all_reduce"]
    with pytest.raises(AssertionError, match=r"its code calls dist\.all_reduce"):
        cl.message_passing.check.reduce_then_broadcast(imported, world_sizes=(2,))


def test_source_scan_ignores_tensor_methods_and_functools_reduce():
    import functools

    def fine(tensor, rank, world_size):
        idx = torch.zeros(1, dtype=torch.long)
        functools.reduce(lambda a, b: a + b, [tensor.gather(0, idx)])
        dist.barrier()
        return tensor

    assert cl.message_passing.check.collectives_in_source(fine) == []
    assert (
        cl.message_passing.check.collectives_in_source(
            cl.message_passing.answer.reduce_then_broadcast
        )
        == []
    )
