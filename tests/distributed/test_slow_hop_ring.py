"""A real ring with one slow hop: the delay is paid at every step, on every rank."""

import pytest
import torch

import clusterlab as cl
from clusterlab.ring import measure as rh

pytestmark = [
    pytest.mark.timing,
    pytest.mark.dist,
    pytest.mark.usefixtures("no_leftover_processes"),
]


def test_one_slow_hop_slows_the_whole_ring():
    delay_s, n = 5e-3, 4
    df = rh.measure_slow_hop(n, 2**12, send_delay_s=delay_s, repeats=2, warmup=1)
    best = rh.summarize_timings(df)["best_s"]
    # sleeps never end early: 2(n - 1) steps each wait for the slow hop's delay
    floor = 2 * (n - 1) * delay_s
    assert best["one slow hop"] >= floor and best["every hop slow"] >= floor
    assert best["uniform fast"] < best["one slow hop"]
    assert df.attrs["world_size"] == n and df.attrs["overshoot_s"] >= 0


def _slow_sum_worker(rank, world_size):
    x = torch.full((10,), float(rank))
    kw = {"send_delay_s": 1e-3, "send_Bps": 1e6} if rank == 1 else {}
    stats = {}
    cl.ring.ranks.ring_allreduce(x, stats=stats, **kw)
    return x, stats


def test_a_slow_hop_still_gives_the_right_sum():
    for x, stats in cl.launch(_slow_sum_worker, 3, timeout=60):
        assert torch.equal(x, torch.full((10,), 3.0)) and stats["messages"] == 4


def test_slow_hop_arguments_are_validated():
    def worker(rank, world_size):
        cl.ring.ranks.ring_allreduce(torch.ones(4), send_Bps=0.0)

    with pytest.raises(cl.core.supervisor.LaunchError, match="send_Bps=0.0"):
        cl.launch(worker, 2, timeout=30)
