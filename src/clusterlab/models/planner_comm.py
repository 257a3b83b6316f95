"""The planner's communication times: published bus bandwidth and network links.

Inside a node a collective takes the published all-reduce bus bandwidth at its
own message size (:func:`~clusterlab.models.collectives.bus_bandwidth`, which
grows with the size: about 150 GB/s at 58 MB and 370 GB/s near 10 GB on 8
H100); between nodes, a ring at a network link's rate and latency
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
    scale_up_size,
)
from clusterlab.models.links import as_link

#: Published all-reduce sweep used inside a node: 8 H100 on NVLink 4.
DEFAULT_INTRA_NODE_SYSTEM = "8xH100-scalingbook"


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
) -> float:
    """Seconds of one tensor-parallel all-reduce of ``nbytes`` over ``tp`` GPUs.

    Inside the NVLink domain: ``2(t-1)/t * S / busbw(S)`` with the published
    bus bandwidth at this message size (it grows with the size: 150 GB/s at
    58 MB, 370 GB/s near 10 GB on 8 H100). Beyond it: a ring at the network
    link's rate and latency.

    Args:
        nbytes: bytes each GPU contributes, >= 0.
        tp: tensor-parallel degree, >= 1.
        gpus_per_node: GPUs per server, >= 1.
        intra_node_system: a system of ``cl.published.collective_systems()``.
        inter_node_link: a name of ``cl.models.links.LINKS`` or a ``Link``.
        nvlink_domain: 8 (NVLink ends at the server) or 72 (an NVL72 rack);
            see ``cl.models.collectives.scale_up_size``.

    Returns:
        Seconds (0 for ``tp = 1``).
    """
    tp = check_int("tp", tp, 1)
    domain = scale_up_size(nvlink_domain, gpus_per_node)
    if tp == 1:
        return 0.0
    if tp <= domain:
        return float(allreduce_time_published(nbytes, tp, intra_node_system))
    net = as_link(inter_node_link)
    return float(allreduce_time(nbytes, tp, net.alpha_s, net.effective_Bps))


@functools.lru_cache(maxsize=1024)
def _tp_s(nbytes, tp, gpus_per_node, system, net, nvlink_domain=8):
    return tp_allreduce_s(
        nbytes, tp, gpus_per_node=gpus_per_node, intra_node_system=system,
        inter_node_link=net, nvlink_domain=nvlink_domain,
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
    "matmul_efficiency_of",
    "tp_allreduce_s",
]
