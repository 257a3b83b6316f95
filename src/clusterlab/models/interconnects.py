"""Interconnects and the training step: how much a faster network buys.

A data-parallel training step computes, then all-reduces the gradients; the part
of the all-reduce that does not hide behind computation adds to the step:

    step = compute + max(0, all-reduce - overlap * compute)

The links between nodes are ``cl.models.links.LINKS`` (published line rates
with stated efficiencies and latencies); inside a node the all-reduce runs at
a published system's bus bandwidth at the message's size
(:func:`~clusterlab.models.collectives.bus_bandwidth`). Everything here is a
pure function of its arguments: numbers in, seconds or fractions out.
Contention and mixed GPUs are in ``cl.models.contention``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from clusterlab.core import published
from clusterlab.core.validate import check_float, check_int
from clusterlab.models.collectives import (
    _sweep,
    allreduce_time,
    allreduce_time_published,
    scale_up_size,
)
from clusterlab.models.compute import flops_per_token
from clusterlab.models.links import LINKS, as_link

#: The published all-reduce inside a node that the step model uses: the
#: generation-matched sweep for NVLink 4 and NVSwitch (8 x H200, NVLS).
DEFAULT_INTRA = "8xH200-NVLS-nccl2.27.7"

#: A labelled pessimistic bound on the same NVLink 4: the Scaling Book's two
#: 8 x H100 points, about half the H200 sweep at 32 to 128 MiB.
PESSIMISTIC_INTRA = "8xH100-scalingbook"


def h100_peak_flops() -> float:
    """Dense BF16 FLOP/s of an H100 SXM5 (``data/gpu_specs.csv``)."""
    return published.value("gpu_specs", "bf16_dense_flops", part="H100 SXM5")


def default_mfu() -> float:
    """The stated MFU assumption (``data/step_assumptions.csv``)."""
    return published.value("step_assumptions", "value_fraction", quantity="mfu")


def _intra_time(size, g: int, intra):
    """Seconds of the all-reduce inside a node of ``g`` GPUs over ``intra``."""
    if isinstance(intra, str) and intra not in LINKS:
        _sweep(intra, "all_reduce")  # an unknown name fails here, listing both
        return allreduce_time_published(size, g, intra)
    fast = as_link(intra)
    return allreduce_time(size, g, fast.alpha_s, fast.effective_Bps)


def cluster_allreduce_time(
    grad_bytes,
    network,
    nodes: int,
    gpus_per_node: int = 8,
    nics_per_node: int = 1,
    intra=DEFAULT_INTRA,
    nvlink_domain: int = 8,
):
    """Seconds to all-reduce ``grad_bytes`` over every GPU of a cluster.

    Inside an NVLink domain the GPUs use ``intra``; between domains,
    ``nics_per_node`` ports of ``network`` per node, shared by the node's GPUs
    (hierarchical all-reduce: a reduce-scatter and an all-gather inside the
    domain cost one all-reduce there, and each GPU all-reduces its 1/k share
    across the ``n/k`` groups of ``k`` GPUs). With the default domain, the
    server, ``k`` is the node's ``gpus_per_node``; in a 72-GPU domain it is the
    largest whole number of nodes that divides the job and fits in 72 (64 GPUs
    of a rack for 8-GPU nodes and a power-of-two job). A ``network`` with
    ``per_gpu`` links (NVLink everywhere) is one flat ring.

    Args:
        grad_bytes: bytes of gradient per GPU (a number or an array), >= 0.
        network: a ``Link`` or a name in ``LINKS``.
        nodes: servers, in [1, 100000].
        gpus_per_node: GPUs per server, in [1, 64].
        nics_per_node: network ports per server, in [1, 64].
        intra: inside a node: a published system's name (its bus bandwidth
            at the gradient's size, e.g. ``"8xH200-NVLS-nccl2.27.7"``), or a
            ``Link`` or a name in ``LINKS``.
        nvlink_domain: GPUs one NVLink domain joins, 8 (the server) or 72
            (a GB200 or GB300 NVL72 rack; ``gpus_per_node`` must divide 72).

    Returns:
        Seconds, with the shape of ``grad_bytes``.
    """
    net = as_link(network)
    nodes = check_int("nodes", nodes, 1, 100_000)
    g = check_int("gpus_per_node", gpus_per_node, 1, 64)
    nics = check_int("nics_per_node", nics_per_node, 1, 64)
    domain = scale_up_size(nvlink_domain, g)
    n = nodes * g
    if net.per_gpu:
        return allreduce_time(grad_bytes, n, net.alpha_s, net.effective_Bps)
    # the GPUs of one group: whole nodes, a divisor of the job, within a domain
    k = max(g * j for j in range(1, domain // g + 1) if nodes % j == 0)
    inside = _intra_time(grad_bytes, k, intra)
    if k == n:
        return inside
    share = np.asarray(grad_bytes, dtype=float) / k
    between = allreduce_time(share, n // k, net.alpha_s, nics * net.effective_Bps / g)
    t = np.asarray(inside + between, dtype=float)
    return float(t) if t.ndim == 0 else t


def compute_time(n_params: float, tokens_per_gpu, peak_flops: float, mfu: float):
    """Seconds of arithmetic per step by the 6·N·D rule: ``6 N T / (peak x MFU)``.

    ``mfu`` here is a 6N-only MFU: attention's ``12 L h s`` FLOPs per token are
    left out (the book's MFU, ``models.compute``, counts them).

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
    t = flops_per_token(n_params) * tokens / (peak * mfu)
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


def interconnect_sweep(
    n_params_list,
    tokens_list,
    nics_list,
    *,
    nodes: int = 16,
    gpus_per_node: int = 8,
    bytes_per_grad: int = 2,
    peak_flops: float | None = None,
    mfu: float | None = None,
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
        peak_flops, mfu: the GPU's peak FLOP/s and its utilisation (None: the
            H100 SXM5's dense BF16 peak and the stated MFU assumption).
        overlap: see ``step_time``.
        links: names in ``LINKS`` (or ``Link`` objects).

    Returns:
        One row per combination: ``link, n_params, tokens_per_gpu, nics_per_node,
        compute_s, allreduce_s, exposed_s, step_s, comm_share`` (exposed / step).
    """
    check_int("bytes_per_grad", bytes_per_grad, 1, 8)
    peak_flops = h100_peak_flops() if peak_flops is None else peak_flops
    mfu = default_mfu() if mfu is None else mfu
    rows = []
    for net in map(as_link, links):
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


__all__ = [
    "DEFAULT_INTRA",
    "PESSIMISTIC_INTRA",
    "cluster_allreduce_time",
    "comm_share_needed",
    "compute_time",
    "default_mfu",
    "h100_peak_flops",
    "interconnect_sweep",
    "step_time",
]
