"""Interconnects and the training step: how much a faster network buys.

A data-parallel training step computes, then all-reduces the gradients; the part
of the all-reduce that does not hide behind computation adds to the step:

    step = compute + max(0, all-reduce - overlap * compute)

``LINKS`` holds the links the book compares. Line rates are published
specifications; the *efficiency* (the fraction of the line rate an all-reduce
reaches) and the per-step latency are assumptions, stated in each ``Link`` and
editable with ``link(name, efficiency=...)``. Everything here is a pure function
of its arguments: numbers in, seconds or fractions out.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._validate import check_choice, check_float, check_int
from .collectives import allreduce_time

__all__ = [
    "LINKS",
    "Link",
    "cluster_allreduce_time",
    "comm_share_needed",
    "compute_time",
    "contention_drop",
    "interconnect_sweep",
    "link",
    "mixed_cluster_throughput",
    "network_share_for_drop",
    "step_time",
]


@dataclass(frozen=True)
class Link:
    """One kind of link: its published line rate and our stated assumptions.

    Attributes:
        name: label used in tables and charts.
        line_rate_bps: bits/s per port and direction (published).
        efficiency: fraction of the line rate a large all-reduce reaches (assumed).
        alpha_s: latency of one all-reduce step in seconds (assumed).
        per_gpu: True if every GPU has its own such link (NVLink); False for a
            network port (NIC) shared by the GPUs of a node.
        source: where the line rate and the efficiency come from.
    """

    name: str
    line_rate_bps: float
    efficiency: float
    alpha_s: float
    per_gpu: bool = False
    source: str = ""

    def __post_init__(self):
        check_float("line_rate_bps", self.line_rate_bps, 0.0, low_inclusive=False)
        check_float("efficiency", self.efficiency, 0.0, 1.0, low_inclusive=False)
        check_float("alpha_s", self.alpha_s, 0.0)

    @property
    def per_direction_Bps(self) -> float:
        """Line rate in bytes/s per direction."""
        return self.line_rate_bps / 8

    @property
    def effective_Bps(self) -> float:
        """Bytes/s per direction an all-reduce gets: line rate x efficiency."""
        return self.per_direction_Bps * self.efficiency


LINKS = {
    "100GbE TCP": Link(
        "100GbE TCP",
        100e9,
        0.60,
        30e-6,
        source="100 Gb/s = 12.5 GB/s per direction (IEEE 802.3); 60% and 30 µs "
        "per step through the kernel's TCP stack are assumptions",
    ),
    "100GbE RoCE": Link(
        "100GbE RoCE",
        100e9,
        0.90,
        8e-6,
        source="100 Gb/s = 12.5 GB/s per direction (IEEE 802.3); RDMA offload "
        "assumed to reach 90% like InfiniBand, 8 µs per step assumed",
    ),
    "NDR400 InfiniBand": Link(
        "NDR400 InfiniBand",
        400e9,
        0.92,
        5e-6,
        source="400 Gb/s = 50 GB/s per port and direction (DGX H100 datasheet); "
        "92% = 369 GB/s all-reduce busbw over 4 nodes of 8 x 400 Gb/s (Bekman); "
        "5 µs per step assumed",
    ),
    "NVLink 4": Link(
        "NVLink 4",
        450e9 * 8,
        0.82,
        3e-6,
        per_gpu=True,
        source="900 GB/s both directions = 450 GB/s per direction per H100 "
        "(H100 datasheet); 82% = ~370 of 450 GB/s all-reduce busbw on 8 H100 "
        "(How to Scale Your Model); 3 µs per step assumed",
    ),
}


def link(name: str, **changes) -> Link:
    """A link from ``LINKS``, with any field changed (e.g. ``efficiency=0.5``)."""
    check_choice("name", name, LINKS)
    return dataclasses.replace(LINKS[name], **changes)


def _as_link(value) -> Link:
    if isinstance(value, Link):
        return value
    return link(value)


def cluster_allreduce_time(
    grad_bytes,
    network,
    nodes: int,
    gpus_per_node: int = 8,
    nics_per_node: int = 1,
    intra="NVLink 4",
):
    """Seconds to all-reduce ``grad_bytes`` over every GPU of a cluster.

    Inside a node the GPUs use ``intra``; between nodes, ``nics_per_node`` ports
    of ``network`` shared by the node's GPUs (hierarchical all-reduce). A
    ``network`` with ``per_gpu`` links (NVLink everywhere) is one flat ring.

    Args:
        grad_bytes: bytes of gradient per GPU (a number or an array), >= 0.
        network: a ``Link`` or a name in ``LINKS``.
        nodes: servers, in [1, 100000].
        gpus_per_node: GPUs per server, in [1, 64].
        nics_per_node: network ports per server, in [1, 64].
        intra: the link inside a node (a ``Link`` or a name).

    Returns:
        Seconds, with the shape of ``grad_bytes``.
    """
    net, fast = _as_link(network), _as_link(intra)
    nodes = check_int("nodes", nodes, 1, 100_000)
    g = check_int("gpus_per_node", gpus_per_node, 1, 64)
    nics = check_int("nics_per_node", nics_per_node, 1, 64)
    n = nodes * g
    if net.per_gpu:
        return allreduce_time(grad_bytes, n, net.alpha_s, net.effective_Bps)
    if nodes == 1:
        return allreduce_time(grad_bytes, g, fast.alpha_s, fast.effective_Bps)
    return allreduce_time(
        grad_bytes,
        n,
        net.alpha_s,
        nics * net.effective_Bps / g,  # each GPU's share of the node's ports
        "hierarchical",
        gpus_per_node=g,
        intra_alpha_s=fast.alpha_s,
        intra_bandwidth_Bps=fast.effective_Bps,
    )


def compute_time(n_params: float, tokens_per_gpu, peak_flops: float, mfu: float):
    """Seconds of arithmetic per step by the 6·N·D rule: ``6 N T / (peak x MFU)``.

    Args:
        n_params: model parameters, > 0.
        tokens_per_gpu: tokens each GPU processes between two all-reduces, > 0.
        peak_flops: the GPU's peak FLOP/s, > 0.
        mfu: model FLOP utilisation, in (0, 1].
    """
    n_params = check_float("n_params", n_params, 0.0, low_inclusive=False)
    peak = check_float("peak_flops", peak_flops, 0.0, low_inclusive=False)
    mfu = check_float("mfu", mfu, 0.0, 1.0, low_inclusive=False)
    tokens = np.asarray(tokens_per_gpu, dtype=float)
    if np.any(~(tokens > 0)) or np.any(~np.isfinite(tokens)):
        raise ValueError(f"tokens_per_gpu={tokens_per_gpu!r} must be finite and > 0")
    t = 6 * n_params * tokens / (peak * mfu)
    return float(t) if t.ndim == 0 else t


def step_time(compute_s, comm_s, overlap: float = 0.0):
    """Seconds per step: compute plus the communication that compute cannot hide.

    Args:
        compute_s: seconds of computation, >= 0 (number or array).
        comm_s: seconds of communication, >= 0 (number or array).
        overlap: fraction of the compute that communication can run behind, in
            [0, 1] (about 2/3 at most for gradients: only the backward pass).

    Returns:
        ``compute_s + max(0, comm_s - overlap * compute_s)``.
    """
    overlap = check_float("overlap", overlap, 0.0, 1.0)
    c, m = np.asarray(compute_s, dtype=float), np.asarray(comm_s, dtype=float)
    if np.any(~(c >= 0)) or np.any(~(m >= 0)):
        raise ValueError(f"compute_s={compute_s!r} and comm_s={comm_s!r} must be >= 0")
    t = c + np.maximum(0.0, m - overlap * c)
    return float(t) if t.ndim == 0 else t


def comm_share_needed(comm_cut: float, speedup: float) -> float:
    """Share of the old step that must be exposed communication for a speedup.

    If only communication changes and it gets ``comm_cut`` shorter (0.78 for
    "78% less"), the step shrinks to ``1 - share * comm_cut`` of itself, so a
    ``speedup`` needs ``share = (1 - 1/speedup) / comm_cut``. A result above 1
    means no step can get that speedup from that cut.

    Args:
        comm_cut: fractional cut in communication time, in (0, 1].
        speedup: old step / new step, >= 1.
    """
    cut = check_float("comm_cut", comm_cut, 0.0, 1.0, low_inclusive=False)
    speedup = check_float("speedup", speedup, 1.0)
    return (1 - 1 / speedup) / cut


def contention_drop(network_share, stolen_share):
    """Fraction of throughput lost when other traffic takes part of the network.

    A step whose ``network_share`` is network-bound sees that part slowed by
    ``1 / (1 - stolen_share)``; the rest is unchanged.

    Args:
        network_share: fraction of the step that waits on the network, in [0, 1].
        stolen_share: fraction of the bandwidth other traffic takes, in [0, 1).

    Returns:
        ``1 - 1 / ((1 - f) + f / (1 - c))``: 0 means no loss.
    """
    f = np.asarray(network_share, dtype=float)
    c = np.asarray(stolen_share, dtype=float)
    if np.any(~((f >= 0) & (f <= 1))):
        raise ValueError(f"network_share={network_share!r} must be in [0, 1]")
    if np.any(~((c >= 0) & (c < 1))):
        raise ValueError(f"stolen_share={stolen_share!r} must be in [0, 1)")
    drop = 1 - 1 / ((1 - f) + f / (1 - c))
    return float(drop) if drop.ndim == 0 else drop


def network_share_for_drop(drop: float, stolen_share: float) -> float:
    """Network-bound share of a step that a throughput ``drop`` requires.

    Inverts ``contention_drop``: ``f = (1/(1 - drop) - 1) (1 - c) / c``. A result
    above 1 means that much stolen bandwidth cannot cause that drop.

    Args:
        drop: fractional throughput loss, in [0, 1).
        stolen_share: fraction of the bandwidth other traffic takes, in (0, 1).
    """
    drop = check_float("drop", drop, 0.0, 1.0)
    if drop >= 1:
        raise ValueError(f"drop={drop!r} is out of range: allowed [0, 1)")
    c = check_float("stolen_share", stolen_share, 0.0, 1.0, low_inclusive=False)
    if c >= 1:
        raise ValueError(f"stolen_share={stolen_share!r} is out of range: (0, 1)")
    return (1 / (1 - drop) - 1) * (1 - c) / c


def mixed_cluster_throughput(counts, speeds) -> dict:
    """Throughput of a synchronous job on mixed GPUs: the slowest sets the pace.

    Args:
        counts: GPUs of each kind (ints >= 0, at least one > 0).
        speeds: relative work per second of each kind (> 0), same length.

    Returns:
        ``synchronous`` (every GPU works at the slowest kind's pace),
        ``balanced`` (work split in proportion to speed: the sum of speeds),
        ``lost_share`` (1 - synchronous / balanced) and ``idle_share_fastest``
        (the fraction of each step the fastest kind waits).
    """
    counts = [check_int("counts", c, 0) for c in counts]
    speeds = [check_float("speeds", s, 0.0, low_inclusive=False) for s in speeds]
    if len(counts) != len(speeds) or not any(counts):
        raise ValueError(
            f"counts={counts!r} and speeds={speeds!r} must have the same length, "
            "with at least one GPU"
        )
    used = [s for c, s in zip(counts, speeds, strict=True) if c > 0]
    sync = sum(counts) * min(used)
    balanced = sum(c * s for c, s in zip(counts, speeds, strict=True))
    return {
        "synchronous": sync,
        "balanced": balanced,
        "lost_share": 1 - sync / balanced,
        "idle_share_fastest": 1 - min(used) / max(used),
    }


def interconnect_sweep(
    n_params_list,
    tokens_list,
    nics_list,
    *,
    nodes: int = 16,
    gpus_per_node: int = 8,
    bytes_per_grad: int = 2,
    peak_flops: float = 989.4e12,
    mfu: float = 0.4,
    overlap: float = 0.0,
    links=("100GbE TCP", "100GbE RoCE", "NDR400 InfiniBand", "NVLink 4"),
) -> pd.DataFrame:
    """Step time on each link for every model size, tokens per GPU and NIC count.

    Args:
        n_params_list: model sizes in parameters.
        tokens_list: tokens per GPU between all-reduces.
        nics_list: network ports per node.
        nodes, gpus_per_node: the cluster's shape.
        bytes_per_grad: bytes per gradient value (2 for bf16).
        peak_flops, mfu: the GPU (default H100 SXM dense BF16) and its utilisation.
        overlap: see ``step_time``.
        links: names in ``LINKS`` (or ``Link`` objects).

    Returns:
        One row per combination: ``link, n_params, tokens_per_gpu, nics_per_node,
        compute_s, allreduce_s, exposed_s, step_s, comm_share`` (exposed / step).
    """
    check_int("bytes_per_grad", bytes_per_grad, 1, 8)
    rows = []
    for net in map(_as_link, links):
        for n_params in n_params_list:
            for nics in nics_list:
                ar = cluster_allreduce_time(
                    n_params * bytes_per_grad, net, nodes, gpus_per_node, nics
                )
                for tokens in tokens_list:
                    comp = compute_time(n_params, tokens, peak_flops, mfu)
                    step = step_time(comp, ar, overlap)
                    rows.append(
                        (net.name, n_params, tokens, nics, comp, ar, step - comp, step)
                    )
    cols = "link n_params tokens_per_gpu nics_per_node compute_s allreduce_s"
    df = pd.DataFrame(rows, columns=[*cols.split(), "exposed_s", "step_s"])
    return df.assign(comm_share=df["exposed_s"] / df["step_s"])
