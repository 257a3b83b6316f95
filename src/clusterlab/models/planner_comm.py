"""The planner's communication times: published bus bandwidth and network links.

Inside a node an all-reduce takes the published all-reduce bus bandwidth at its
own message size (:func:`~clusterlab.models.collectives.bus_bandwidth`, which
grows with the size: on the default, the generation-matched 8 x H200 NVLS
sweep, 276 GB/s at 32 MiB and 402 GB/s at 128 MiB; the Scaling Book's two
8 x H100 points, kept as ``PESSIMISTIC_INTRA_NODE_SYSTEM``, give 150 GB/s at
58 MB). Under sequence parallelism a TP group's collectives are a
reduce-scatter and an all-gather, which move (t-1)/t of the message over each
GPU's link whatever the switch does (NVLS gains on an all-reduce because the
switch adds); they are priced on the ring's curve
(:func:`~clusterlab.models.collectives.ring_bus_bandwidth`: the 8 x H200
ring's published plateau, 368 GB/s, on the 8 x A100 ring's measured shape:
217 GB/s at 32 MiB and 277 GB/s at 128 MiB, against NVLS's 276 and 402).
Between nodes, a ring at a network link's rate and latency
(``cl.models.links.LINKS``, one row of ``data/link_assumptions.csv``). The
matmul efficiency is read from ``data/matmul_achieved.csv``. Cached: a planner
sweep asks for the same message many times.
"""

from __future__ import annotations

import functools

from clusterlab.core import published
from clusterlab.core.validate import check_int
from clusterlab.models.collectives import (
    allreduce_time,
    allreduce_time_published,
    bus_bandwidth,
    ring_bus_bandwidth,
    scale_up_size,
)
from clusterlab.models.links import as_link

#: Published all-reduce sweep used inside a node: the generation-matched one
#: for NVLink 4 and NVSwitch (8 x H200, NCCL's default, NVLS from 2 MiB).
DEFAULT_INTRA_NODE_SYSTEM = "8xH200-NVLS-nccl2.27.7"

#: A labelled pessimistic bound: the Scaling Book's two 8 x H100 points
#: (150 GB/s at 58 MB, 370 GB/s at 10 GB), about half the H200 sweep at TP's
#: message sizes on the same NVLink 4 and NVSwitch.
PESSIMISTIC_INTRA_NODE_SYSTEM = "8xH100-scalingbook"

#: The ring a sequence-parallel TP group's reduce-scatters and all-gathers run
#: on inside a node: the 8 x H200 ring's published plateau (NVLS off, 16 GiB)
#: on the measured shape of the 8 x A100 ring sweep (no H200 ring sweep below
#: 8 GiB is published).
SP_RING = ("8xH200-ring-nccl2.27.7", "8xA100-nccltests")


#: The network link each GPU uses between nodes: one NDR400 port per GPU.
DEFAULT_INTER_NODE_LINK = "NDR400 InfiniBand"


def matmul_efficiency_of(part: str = "H100 SXM5", dtype: str = "bf16") -> float:
    """Best achieved matmul FLOP/s over the peak, from ``data/matmul_achieved``.

    Args:
        part: a ``part`` of that table.
        dtype: "bf16" or "fp8" (rows exist for some parts only).

    Returns:
        The fraction (0.80 for the H100 SXM5 in bf16: 794.5 of 989 TFLOP/s;
        0.73 for the H200 SXM in fp8: 1453 of 1979).
    """
    row = published.row("matmul_achieved", part=part, dtype=dtype)
    return float(row["achieved_flops"] / row["peak_flops"])


def tp_allreduce_s(
    nbytes: float,
    tp: int,
    *,
    gpus_per_node: int = 8,
    intra_node_system: str = DEFAULT_INTRA_NODE_SYSTEM,
    inter_node_link=DEFAULT_INTER_NODE_LINK,
    nvlink_domain: int = 8,
    sequence_parallel: bool = False,
    sp_ring: tuple[str, str] = SP_RING,
) -> float:
    """Seconds of one tensor-parallel all-reduce of ``nbytes`` over ``tp`` GPUs.

    Inside the NVLink domain: ``2(t-1)/t * S / busbw(S)`` with the published
    bus bandwidth at this message size (it grows with the size: 276 GB/s at
    32 MiB, 402 GB/s at 128 MiB on the default 8 x H200 NVLS sweep). Under
    sequence parallelism the all-reduce is a reduce-scatter plus an
    all-gather of the same bytes, ``2(t-1)/t * S`` over the ring's bus
    bandwidth at this size (``sp_ring``; NVLS does not shorten them: each GPU
    still moves (t-1)/t of the message for each).
    Beyond the domain: a ring at the network link's rate and latency.

    Args:
        nbytes: bytes each GPU contributes, >= 0.
        tp: tensor-parallel degree, >= 1.
        gpus_per_node: GPUs per server, >= 1.
        intra_node_system: a system of ``cl.published.collective_systems()``.
        inter_node_link: a name of ``cl.models.links.LINKS`` or a ``Link``.
        nvlink_domain: 8 (NVLink ends at the server) or 72 (an NVL72 rack);
            see ``cl.models.collectives.scale_up_size``.
        sequence_parallel: True for the reduce-scatter and all-gather pair of
            sequence parallelism (the ring's curve inside the domain).
        sp_ring: (plateau system, shape system) of that pair's ring curve
            (:func:`~clusterlab.models.collectives.ring_bus_bandwidth`).

    Returns:
        Seconds (0 for ``tp = 1``).
    """
    tp = check_int("tp", tp, 1)
    domain = scale_up_size(nvlink_domain, gpus_per_node)
    if tp == 1:
        return 0.0
    if tp <= domain and sequence_parallel:
        busbw = ring_bus_bandwidth(nbytes, *sp_ring)
        return 2 * (tp - 1) / tp * float(nbytes) / busbw if nbytes > 0 else 0.0
    if tp <= domain:
        return float(allreduce_time_published(nbytes, tp, intra_node_system))
    net = as_link(inter_node_link)
    return float(allreduce_time(nbytes, tp, net.alpha_s, net.effective_Bps))


@functools.lru_cache(maxsize=1024)
def _tp_s(nbytes, tp, gpus_per_node, system, net, nvlink_domain=8, sp=False):
    return tp_allreduce_s(
        nbytes, tp, gpus_per_node=gpus_per_node, intra_node_system=system,
        inter_node_link=net, nvlink_domain=nvlink_domain, sequence_parallel=sp,
    )  # fmt: skip


@functools.lru_cache(maxsize=1024)
def _busbw(nbytes, system):
    return float(bus_bandwidth(nbytes, system))


@functools.lru_cache(maxsize=1024)
def _dp_s(nbytes, dp, inside, system, net):
    """Seconds of the gradient all-reduce over ``dp`` GPUs (ring)."""
    if dp == 1:
        return 0.0
    if inside:
        return float(allreduce_time_published(nbytes, dp, system))
    return float(allreduce_time(nbytes, dp, net.alpha_s, net.effective_Bps))


__all__ = [
    "DEFAULT_INTER_NODE_LINK",
    "DEFAULT_INTRA_NODE_SYSTEM",
    "PESSIMISTIC_INTRA_NODE_SYSTEM",
    "SP_RING",
    "matmul_efficiency_of",
    "tp_allreduce_s",
]
