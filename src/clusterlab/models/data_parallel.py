"""Models of data parallelism: DDP's bucketed overlap and ZeRO's memory per GPU.

Pure functions, no ``torch``: the data-parallel and FSDP labs measure the real
thing with ``clusterlab.data_parallel.ranks`` and ``clusterlab.fsdp.ranks``, and their
widgets redraw from these models without starting a process group.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from clusterlab.core.validate import check_float, check_int
from clusterlab.models.collectives import allreduce_time
from clusterlab.models.memory import training_memory

#: The three kinds of model state, named as in ``training_memory``'s result.
STATE_KINDS = ("weights", "grads", "optimizer")


def bucket_overlap_time(
    backward_s: float,
    grad_bytes: float,
    world_size: int,
    alpha_s: float,
    bw_Bps: float,
    buckets: int = 1,
    bucket_bytes=None,
) -> dict:
    """When the last gradient all-reduce ends, if DDP sends ``buckets`` buckets.

    The model behind DDP's buckets: the backward pass produces gradients at an
    even rate; a bucket's all-reduce may start once its gradients are ready and
    the previous bucket's all-reduce is done (one at a time, as on one stream).
    Each costs the ring all-reduce of ``grad_bytes / buckets`` bytes
    (``allreduce_time``). Few buckets start late; many
    buckets pay the latency many times.

    Args:
        backward_s: seconds of the backward pass, >= 0.
        grad_bytes: bytes of gradients per rank, >= 0.
        world_size: ranks, in [1, 10**7].
        alpha_s: latency of one all-reduce step, seconds, >= 0.
        bw_Bps: bytes/s per rank and direction, > 0.
        buckets: buckets the gradients are split into, in [1, 100000].
        bucket_bytes: None (``buckets`` equal buckets), or each bucket's bytes in
            the order the backward pass fills them (as DDP reports them); they
            must add up to ``grad_bytes``, and a bucket is ready once the
            backward pass has produced its share of the gradients.

    Returns:
        dict: ``comm_s`` (all buckets' all-reduce time), ``done_s`` (backward and
        all-reduces both finished) and ``exposed_s`` (``done_s - backward_s``,
        the communication the backward pass did not hide), all in seconds.
    """
    backward_s = check_float("backward_s", backward_s, 0.0)
    grad_bytes = check_float("grad_bytes", grad_bytes, 0.0)
    buckets = check_int("buckets", buckets, 1, 100_000)
    if bucket_bytes is None:
        sizes = [grad_bytes / buckets] * buckets
    else:
        sizes = [
            check_float(f"bucket_bytes[{i}]", b, 0.0)
            for i, b in enumerate(bucket_bytes)
        ]
        if not sizes or not np.isclose(sum(sizes), grad_bytes, rtol=1e-6):
            raise ValueError(
                f"bucket_bytes={list(bucket_bytes)!r} must add up to "
                f"grad_bytes={grad_bytes:g}"
            )
    total = sum(sizes)
    # the share of the backward pass done when each bucket is full; the last
    # bucket is full when the backward pass ends, whatever the rounding
    shares = np.cumsum(sizes) / total if total > 0 else np.ones(len(sizes))
    shares[-1] = 1.0
    end_s, comm_s = 0.0, 0.0
    for size, share in zip(sizes, shares, strict=True):
        ready_s = backward_s * float(share)
        per_bucket_s = float(allreduce_time(size, world_size, alpha_s, bw_Bps))
        end_s = max(end_s, ready_s) + per_bucket_s
        comm_s += per_bucket_s
    done_s = max(end_s, backward_s)
    return {
        "comm_s": comm_s,
        "done_s": done_s,
        "exposed_s": done_s - backward_s,
    }


def bucket_sweep(
    backward_s: float,
    grad_bytes: float,
    alpha_s: float,
    bw_Bps: float,
    *,
    world_sizes=(2, 4, 8, 16, 64),
    compute_scales=(1, 10, 100),
    buckets=tuple(2**k for k in range(9)),
) -> pd.DataFrame:
    """``bucket_overlap_time`` over a grid, as a tidy DataFrame for a chart.

    Args:
        backward_s, grad_bytes, alpha_s, bw_Bps: as for ``bucket_overlap_time``.
        world_sizes: ranks to try.
        compute_scales: factors on ``backward_s`` (a slower or larger model's
            backward pass over the same gradients), each > 0.
        buckets: bucket counts to try.

    Returns:
        Columns ``world_size, compute_scale, buckets, backward_s, comm_s,
        done_s, exposed_s``.
    """
    rows = []
    for n in world_sizes:
        for scale in compute_scales:
            scale = check_float("compute_scales", scale, 0.0, low_inclusive=False)
            for k in buckets:
                t = bucket_overlap_time(
                    backward_s * scale, grad_bytes, n, alpha_s, bw_Bps, k
                )
                rows.append(
                    {
                        "world_size": int(n),
                        "compute_scale": scale,
                        "buckets": int(k),
                        "backward_s": backward_s * scale,
                        **t,
                    }
                )
    return pd.DataFrame(rows).astype({"compute_scale": np.float64})


def zero_memory_sweep(
    n_params_list=(1e9, 7e9, 70e9),
    dp_list=(1, 2, 4, 8, 16, 32, 64, 128, 256),
    stages=(0, 1, 2, 3),
) -> pd.DataFrame:
    """Model state per GPU for every model size, DP degree and ZeRO stage.

    Mixed-precision Adam (2 + 2 + 12 bytes per parameter, Rajbhandari et al.
    2020), from ``clusterlab.models.memory.training_memory``; no activations.

    Returns:
        Tidy DataFrame ``n_params, dp, zero_stage, kind, bytes`` (one row per
        kind: weights, grads, optimizer) plus ``total_bytes`` per combination.
    """
    rows = []
    for n_params in n_params_list:
        for dp in dp_list:
            for stage in stages:
                mem = training_memory(n_params, dp=dp, zero_stage=stage)
                for kind in STATE_KINDS:
                    rows.append(
                        {
                            "n_params": float(n_params),
                            "dp": int(dp),
                            "zero_stage": int(stage),
                            "kind": kind,
                            "bytes": mem[kind],
                            "total_bytes": mem["total"],
                        }
                    )
    return pd.DataFrame(rows)


__all__ = ["STATE_KINDS", "bucket_overlap_time", "bucket_sweep", "zero_memory_sweep"]
