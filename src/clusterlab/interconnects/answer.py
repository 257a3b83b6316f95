"""Reference solution: how many network ports a node needs."""

from __future__ import annotations


def ports_needed(n_params, tokens_per_gpu, network, max_share=0.10, nodes=16):
    """The fewest ports per 8-GPU node that keep exposed communication small.

    A data-parallel step of ``n_params`` parameters (bf16 gradients, no
    overlap) at the H100's peak and the stated MFU; the exposed share is
    (step - compute) / step.

    Args:
        n_params: model parameters.
        tokens_per_gpu: tokens each GPU processes between all-reduces.
        network: a name in ``cl.models.links.LINKS``.
        max_share: the largest exposed share allowed, in (0, 1).
        nodes: servers of 8 GPUs.

    Returns:
        The fewest ports in 1..8 that keep the share at or below
        ``max_share``, or None if even 8 (one per GPU) do not.
    """
    from clusterlab.models import interconnects as ic

    peak, mfu = ic.h100_peak_flops(), ic.default_mfu()
    compute = ic.compute_time(n_params, tokens_per_gpu, peak, mfu)
    for ports in range(1, 9):
        comm = ic.cluster_allreduce_time(2 * n_params, network, nodes, 8, ports)
        step = ic.step_time(compute, comm)
        if (step - compute) / step <= max_share:
            return ports
    return None


__all__ = ["ports_needed"]
