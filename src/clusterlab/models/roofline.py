"""The roofline model, arithmetic intensity, and how many CPU cores a stream needs.

A processor can do at most ``peak_flops`` arithmetic per second and move at most
``bandwidth_Bps`` bytes per second to and from its memory. A kernel that does
``I`` FLOP for every byte it moves (its *arithmetic intensity*) therefore runs
at no more than ``min(peak_flops, I * bandwidth_Bps)``: the roofline of
Williams, Waterman and Patterson (2009). Below the *ridge* intensity
``peak_flops / bandwidth_Bps`` a kernel waits on memory; above it, on arithmetic.

The second half is the utilisation law of queueing theory, ``U = X * S / c``:
``c`` cores serving ``X`` events per second at ``S`` seconds each are busy a
fraction ``U`` of the time, so a target utilisation fixes the number of cores.

Everything here is a pure function in SI units (FLOP/s, bytes/s, seconds).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from clusterlab.core.validate import check_float, check_int


def _positive_array(name: str, value) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r} must be a number > 0") from None
    if arr.size == 0 or np.any(~np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(
            f"{name}={value!r} is out of range: allowed finite values in (0, inf)"
        )
    return arr


def attainable_flops(intensity, peak_flops: float, bandwidth_Bps: float):
    """The roofline: the most FLOP/s a kernel of this intensity can reach.

    Args:
        intensity: arithmetic intensity in FLOP per byte moved, > 0 (number or
            array).
        peak_flops: the processor's peak arithmetic rate in FLOP/s, > 0.
        bandwidth_Bps: its memory bandwidth in bytes/s, > 0.

    Returns:
        ``min(peak_flops, intensity * bandwidth_Bps)`` in FLOP/s, shaped like
        ``intensity``.
    """
    i = _positive_array("intensity", intensity)
    peak = check_float("peak_flops", peak_flops, 0.0, low_inclusive=False)
    bw = check_float("bandwidth_Bps", bandwidth_Bps, 0.0, low_inclusive=False)
    out = np.minimum(peak, i * bw)
    return float(out) if out.ndim == 0 else out


def ridge_intensity(peak_flops: float, bandwidth_Bps: float) -> float:
    """The intensity (FLOP/byte) where the roofline turns from memory- to compute-bound.

    Args:
        peak_flops: peak arithmetic rate in FLOP/s, > 0.
        bandwidth_Bps: memory bandwidth in bytes/s, > 0.

    Returns:
        ``peak_flops / bandwidth_Bps`` in FLOP per byte.
    """
    peak = check_float("peak_flops", peak_flops, 0.0, low_inclusive=False)
    bw = check_float("bandwidth_Bps", bandwidth_Bps, 0.0, low_inclusive=False)
    return peak / bw


def roofline_bound(intensity: float, peak_flops: float, bandwidth_Bps: float) -> str:
    """Say which roof limits a kernel: ``"memory"`` or ``"compute"``.

    Args:
        intensity: FLOP per byte, > 0.
        peak_flops: FLOP/s, > 0.
        bandwidth_Bps: bytes/s, > 0.

    Returns:
        ``"memory"`` below the ridge intensity, else ``"compute"``.
    """
    i = check_float("intensity", intensity, 0.0, low_inclusive=False)
    return "memory" if i < ridge_intensity(peak_flops, bandwidth_Bps) else "compute"


def matmul_intensity(m: int, n: int, k: int, bytes_per_element: int = 2) -> float:
    """Arithmetic intensity of ``C = A @ B`` (A is m×k, B k×n) moving each matrix once.

    A multiply-add per (i, j, l) is 2·m·n·k FLOP; reading A and B and writing C
    moves (m·k + k·n + m·n) elements. Caches can only make the real traffic
    larger than this minimum, so the result is an upper bound on the intensity.

    Args:
        m, n, k: matrix dimensions, each in [1, 10**7].
        bytes_per_element: 2 for bf16/fp16, 4 for fp32, 8 for fp64 (1 to 8).

    Returns:
        FLOP per byte.
    """
    m = check_int("m", m, 1, 10**7)
    n = check_int("n", n, 1, 10**7)
    k = check_int("k", k, 1, 10**7)
    b = check_int("bytes_per_element", bytes_per_element, 1, 8)
    return 2.0 * m * n * k / (b * (m * k + k * n + m * n))


def cores_needed(
    events_per_s: float, cost_s_per_event: float, utilisation: float = 0.7
) -> int:
    """Cores that keep up with a stream of events at a target utilisation.

    From the utilisation law ``U = X * S / c``: ``c = ceil(X * S / U)``. Running
    cores below 100% busy leaves room for bursts; queueing delay grows without
    bound as ``U`` approaches 1.

    Args:
        events_per_s: arrival rate X in events per second, > 0.
        cost_s_per_event: CPU time S per event on one core in seconds, > 0.
        utilisation: the fraction of each core's time to plan for, in (0, 1].

    Returns:
        The whole number of cores, at least 1.
    """
    x = check_float("events_per_s", events_per_s, 0.0, low_inclusive=False)
    s = check_float("cost_s_per_event", cost_s_per_event, 0.0, low_inclusive=False)
    u = check_float("utilisation", utilisation, 0.0, 1.0, low_inclusive=False)
    # Round before ceil so that 2.0000000001 from float error stays 2.
    return max(1, math.ceil(round(x * s / u, 9)))


def workload_table() -> pd.DataFrame:
    """The workloads of the GPU-versus-CPU table, each with its arithmetic intensity.

    Each row names a representative kernel, its intensity in FLOP per byte of
    memory traffic (with the arithmetic in ``derivation``), and what limits it
    when intensity is not the whole story.

    Returns:
        A DataFrame with columns ``workload, kernel, intensity_flop_per_byte,
        derivation, limited_by``.
    """
    train = matmul_intensity(4096, 8192, 8192)
    batch = matmul_intensity(32, 8192, 8192)
    single = matmul_intensity(1, 8192, 8192)
    rows = [
        (
            "LLM training",
            "bf16 matmul, 4096 tokens × 8192 × 8192",
            train,
            "2·4096·8192² FLOP / 2 B·(4096·8192 + 8192² + 4096·8192)",
            "arithmetic",
        ),
        (
            "batch inference",
            "bf16 matmul, batch 32 × 8192 × 8192",
            batch,
            "each 2-byte weight serves 32 requests at 2 FLOP each: ≈ 32",
            "arithmetic and memory",
        ),
        (
            "one request at a time",
            "bf16 matrix-vector, 8192 × 8192",
            single,
            "each 2-byte weight is read for 2 FLOP: ≈ 1",
            "memory bandwidth",
        ),
        (
            "data preprocessing",
            "fp32 elementwise x·a + b over a column",
            2 / 8,
            "2 FLOP per 4 B read + 4 B written",
            "disk and network I/O",
        ),
        (
            "real-time analytics",
            "sum of an fp64 column",
            1 / 8,
            "1 FLOP per 8-byte value read",
            "memory and network; latency per event",
        ),
        (
            "web serving / key-value store",
            "hash lookup, copy a 1 KB value",
            1 / 1024,
            "about 1 hash per 1 KB moved; almost no floating point",
            "network, system calls, branches",
        ),
    ]
    return pd.DataFrame(
        rows,
        columns=[
            "workload",
            "kernel",
            "intensity_flop_per_byte",
            "derivation",
            "limited_by",
        ],
    )


__all__ = [
    "attainable_flops",
    "cores_needed",
    "matmul_intensity",
    "ridge_intensity",
    "roofline_bound",
    "workload_table",
]
