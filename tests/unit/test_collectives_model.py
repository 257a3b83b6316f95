"""All-reduce cost model: hand-computed cases and invariants."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterlab.models.collectives import allreduce_busbw, allreduce_time

HIER = dict(gpus_per_node=8, intra_alpha_s=2e-6, intra_bandwidth_Bps=400e9)


def test_two_rank_ring_by_hand():
    # n = 2: 2 steps of alpha, and each rank sends half the tensor twice = S bytes.
    t = allreduce_time(1e9, 2, 10e-6, 10e9)
    assert t == pytest.approx(2 * 10e-6 + 1e9 / 10e9)


def test_latency_only_case():
    # Zero bytes: only the steps count. Ring over 8 ranks: 14 steps; tree: 2 * 3.
    assert allreduce_time(0, 8, 5e-6, 1e9) == pytest.approx(14 * 5e-6)
    assert allreduce_time(0, 8, 5e-6, 1e9, "tree") == pytest.approx(6 * 5e-6)
    assert allreduce_time(1e6, 8, 5e-6, math.inf) == pytest.approx(14 * 5e-6)
    # A non-power of two rounds the tree up: 5 ranks need 3 rounds.
    assert allreduce_time(0, 5, 1e-6, 1e9, "tree") == pytest.approx(6e-6)


def test_bandwidth_only_case():
    # alpha = 0: ring and tree both move 2 (n-1)/n of S; 4 ranks, 1 GB at 1 GB/s.
    for algorithm in ("ring", "tree"):
        assert allreduce_time(1e9, 4, 0.0, 1e9, algorithm) == pytest.approx(1.5)


def test_hierarchical_by_hand():
    # 2 nodes x 8 GPUs, 1.6 GB: intra ring 14 * 2 us + 1.75 * 1.6e9 / 400e9,
    # then each GPU all-reduces 0.2 GB over 2 nodes at 50 GB/s: 2 * 10 us + 0.2e9/50e9.
    t = allreduce_time(1.6e9, 16, 10e-6, 50e9, "hierarchical", **HIER)
    intra = 14 * 2e-6 + 1.75 * 1.6e9 / 400e9
    inter = 2 * 10e-6 + 1.0 * 0.2e9 / 50e9
    assert t == pytest.approx(intra + inter)
    # One node: only the NVLink ring.
    one = allreduce_time(1.6e9, 8, 10e-6, 50e9, "hierarchical", **HIER)
    assert one == pytest.approx(intra)


def test_hierarchical_pays_fewer_network_latencies_than_a_flat_ring():
    n, alpha = 1024, 10e-6
    flat = allreduce_time(0, n, alpha, 50e9)
    hier = allreduce_time(0, n, alpha, 50e9, "hierarchical", **HIER)
    assert hier < flat / 7  # 2*127 network steps (+ 14 fast ones) against 2*1023


def test_one_rank_costs_nothing_and_arrays_keep_their_shape():
    assert allreduce_time(1e9, 1, 1e-3, 1e9) == 0.0
    out = allreduce_time(np.array([0.0, 1e9]), 2, 0.0, 1e9)
    assert out.shape == (2,) and out[1] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n=0), "n=0"),
        (dict(alpha_s=-1.0), "alpha_s=-1.0"),
        (dict(bandwidth_Bps=0), "bandwidth_Bps=0"),
        (dict(nbytes=-5), "nbytes=-5"),
        (dict(algorithm="star"), "algorithm='star'"),
        (dict(gpus_per_node=8), "unexpected"),
    ],
)
def test_bad_inputs_name_the_argument(kwargs, match):
    args = dict(nbytes=1e6, n=4, alpha_s=1e-6, bandwidth_Bps=1e9) | kwargs
    with pytest.raises(ValueError, match=match):
        allreduce_time(**args)


def test_hierarchical_inputs_are_checked():
    with pytest.raises(ValueError, match="needs"):
        allreduce_time(1e6, 16, 1e-6, 1e9, "hierarchical", gpus_per_node=8)
    with pytest.raises(ValueError, match="must divide"):
        allreduce_time(1e6, 12, 1e-6, 1e9, "hierarchical", **HIER)


def test_busbw_of_a_modelled_ring_is_the_link_bandwidth():
    t = allreduce_time(1e9, 8, 0.0, 50e9)
    assert allreduce_busbw(1e9, 8, t) == pytest.approx(50e9)
    with pytest.raises(ValueError):
        allreduce_busbw(1e9, 8, 0.0)


@given(
    nbytes=st.floats(0, 1e11),
    n=st.integers(1, 4096),
    alpha=st.floats(0, 1e-3),
    bw=st.floats(1e6, 1e12),
    factor=st.floats(1.0, 100.0),
    algorithm=st.sampled_from(["ring", "tree"]),
)
def test_more_bandwidth_never_makes_an_all_reduce_slower(
    nbytes, n, alpha, bw, factor, algorithm
):
    slow = allreduce_time(nbytes, n, alpha, bw, algorithm)
    fast = allreduce_time(nbytes, n, alpha, bw * factor, algorithm)
    assert fast <= slow * (1 + 1e-12)


@given(
    nbytes=st.floats(0, 1e11),
    nodes=st.integers(1, 256),
    bw=st.floats(1e8, 1e12),
    intra_factor=st.floats(1.0, 100.0),
    net_factor=st.floats(1.0, 100.0),
)
def test_more_bandwidth_never_slows_a_hierarchical_all_reduce(
    nbytes, nodes, bw, intra_factor, net_factor
):
    topo = dict(gpus_per_node=8, intra_alpha_s=1e-6, intra_bandwidth_Bps=bw)
    slow = allreduce_time(nbytes, 8 * nodes, 5e-6, bw, "hierarchical", **topo)
    topo["intra_bandwidth_Bps"] = bw * intra_factor
    fast = allreduce_time(
        nbytes, 8 * nodes, 5e-6, bw * net_factor, "hierarchical", **topo
    )
    assert fast <= slow * (1 + 1e-12)
