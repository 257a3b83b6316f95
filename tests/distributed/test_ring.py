"""The teaching ring all-reduce against torch's own, on real process groups."""

import pytest
import torch
import torch.distributed as dist

import clusterlab as cl
from clusterlab.ring.ranks import ring_bytes_sent, ring_chunk_sizes

pytestmark = [pytest.mark.dist]

# Lengths below, equal to and above the world size, most not divisible by it.
LENGTHS = (1, 2, 3, 5, 7, 10, 13, 1001)
DTYPES = (torch.float32, torch.float64)


def _device():
    if dist.get_backend() == "nccl":
        return torch.device("cuda", dist.get_rank())
    return torch.device("cpu")


def _compare_worker(rank, world_size, lengths, dtypes):
    """Run both all-reduces on the same random data; return the worst mismatch."""
    device = _device()
    rows = []
    for dtype in dtypes:
        for length in lengths:
            gen = torch.Generator().manual_seed(1000 * rank + length)
            x = torch.randn(length, generator=gen, dtype=dtype).to(device)
            expected = x.clone()
            dist.all_reduce(expected)
            stats = {}
            got = x.clone()
            out = cl.ring.ranks.ring_allreduce(got, stats=stats)
            rows.append(
                {
                    "dtype": str(dtype),
                    "length": length,
                    "same_object": out is got,
                    "close": torch.allclose(got, expected, rtol=1e-5, atol=1e-5),
                    "max_err": (got - expected).abs().max().item(),
                    "bytes_sent": stats.get("bytes_sent", 0),
                    "predicted": ring_bytes_sent(
                        length, x.element_size(), world_size, rank
                    ),
                }
            )
    return rows


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_ring_equals_dist_all_reduce(world_size):
    results = cl.launch(
        _compare_worker, world_size, timeout=60, lengths=LENGTHS, dtypes=DTYPES
    )
    for rank, rows in enumerate(results):
        assert len(rows) == len(LENGTHS) * len(DTYPES)
        for row in rows:
            where = f"rank {rank}, {row['dtype']}, length {row['length']}"
            assert row["close"], f"{where}: max error {row['max_err']:.3g}"
            assert row["same_object"], f"{where}: must reduce in place"
            assert row["bytes_sent"] == row["predicted"], where


def _shapes_worker(rank, world_size):
    """A 2-D tensor, a non-contiguous view, and a sub-group of ranks 1 and 3."""
    device = _device()
    a = torch.arange(12, dtype=torch.float64, device=device).reshape(3, 4) + rank
    cl.ring.ranks.ring_allreduce(a)
    base = torch.arange(20, dtype=torch.float32, device=device).reshape(4, 5)
    b = (base * (rank + 1)).t()  # transposed: not contiguous
    cl.ring.ranks.ring_allreduce(b)
    sub = dist.new_group([1, 3])
    c = torch.full((7,), float(rank), device=device)
    if rank in (1, 3):
        cl.ring.ranks.ring_allreduce(c, group=sub)
    return {"a": a, "b": b, "c": c}


def test_shapes_views_and_subgroups():
    n = 4
    results = cl.launch(_shapes_worker, n, timeout=60)
    total = sum(range(n))
    a_expected = n * torch.arange(12, dtype=torch.float64).reshape(3, 4) + total
    base = torch.arange(20, dtype=torch.float32).reshape(4, 5)
    b_expected = (base * sum(range(1, n + 1))).t()
    for rank, r in enumerate(results):
        assert torch.equal(r["a"], a_expected), f"rank {rank}: 2-D tensor"
        assert torch.allclose(r["b"], b_expected), f"rank {rank}: transposed view"
        want = 4.0 if rank in (1, 3) else float(rank)
        assert torch.equal(r["c"], torch.full((7,), want)), f"rank {rank}: subgroup"


def test_world_size_one_leaves_the_tensor_alone():
    def worker(rank, world_size):
        x = torch.arange(5.0)
        stats = {}
        cl.ring.ranks.ring_allreduce(x, stats=stats)
        return x, stats

    [(x, stats)] = cl.launch(worker, 1)
    assert torch.equal(x, torch.arange(5.0)) and stats == {}


def test_chunk_sizes_cover_the_tensor_like_tensor_split():
    for numel in (0, 1, 5, 12, 13):
        for n in (1, 2, 3, 4, 7):
            sizes = ring_chunk_sizes(numel, n)
            split = [len(c) for c in torch.tensor_split(torch.empty(numel), n)]
            assert sizes == split


def test_bytes_sent_is_two_n_minus_one_over_n_of_the_tensor():
    # 12 float32 elements on 4 ranks: chunks of 3, each rank sends 6 chunks of 12 B.
    assert ring_bytes_sent(12, 4, 4, 0) == 2 * 3 * 3 * 4
    assert ring_bytes_sent(1000, 8, 1, 0) == 0
    # 5 elements on 2 ranks, chunks [3, 2]: rank 0 sends chunk 0 then chunk 1.
    assert ring_bytes_sent(5, 4, 2, 0) == (3 + 2) * 4
    with pytest.raises(ValueError, match="rank=4"):
        ring_bytes_sent(12, 4, 4, 4)


def test_ring_rejects_a_non_tensor():
    with pytest.raises(ValueError, match="tensor="):
        cl.ring.ranks.ring_allreduce([1.0, 2.0])


def test_the_reference_all_gather_passes_the_check(capsys):
    assert cl.ring.check.ring_allgather(cl.ring.answer.ring_allgather) is True
    assert "\u2714 ring_allgather" in capsys.readouterr().out


def test_a_stub_all_gather_is_not_attempted(capsys):
    def stub(chunks, rank, world_size):
        raise NotImplementedError

    assert cl.ring.check.ring_allgather(stub) is False
    assert "not attempted" in capsys.readouterr().out


def test_an_all_gather_one_step_short_fails_with_a_hint():
    def one_step(chunks, rank, world_size):
        n = world_size
        req = dist.isend(chunks[(rank + 1) % n], (rank + 1) % n)
        dist.recv(chunks[rank], (rank - 1) % n)
        req.wait()

    # On 2 ranks one step is enough, so start at 3.
    with pytest.raises(AssertionError, match="stale|n - 1 steps"):
        cl.ring.check.ring_allgather(one_step, world_sizes=(3,))


def test_an_all_gather_with_shifted_indices_fails_with_a_hint():
    def shifted(chunks, rank, world_size):
        n = world_size
        for step in range(n - 1):
            req = dist.isend(chunks[(rank - step) % n], (rank + 1) % n)
            dist.recv(chunks[(rank - step - 1) % n], (rank - 1) % n)
            req.wait()

    with pytest.raises(AssertionError, match="ring_allgather on 2 ranks"):
        cl.ring.check.ring_allgather(shifted)


def test_a_deadlocked_all_gather_becomes_a_hint(monkeypatch):
    monkeypatch.setattr(cl.core.checks, "CHECK_TIMEOUT_S", 2.0)

    def deadlock(chunks, rank, world_size):
        dist.recv(chunks[0], (rank - 1) % world_size)  # all wait, none sends

    with pytest.raises(AssertionError, match="isend"):
        cl.ring.check.ring_allgather(deadlock, world_sizes=(2,))
