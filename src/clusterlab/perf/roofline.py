"""Measuring the two roofs of this machine, and checking a benchmark against itself.

The roofline needs two numbers per processor: the arithmetic rate it reaches
on a large matrix multiply (compute-bound), and the byte rate it reaches on a
large copy (memory-bound, like the *Copy* kernel of McCalpin's STREAM). Both are
timed as the best of several repeats, since noise on a shared machine only adds
time. On a GPU every timing ends with ``torch.cuda.synchronize()``, because
CUDA calls return before the work is done.

Two helpers serve Lab 04: ``bench_vs_plain_loop`` times ``dist.all_reduce`` in a
plain loop and with ``bench_collective``'s own worker *in the same process
group*, and ``alpha_beta_holdout`` fits the alpha–beta model on half of a sweep
and predicts the other half.

Run it from a shell: ``python -m clusterlab.perf.roofline``.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from .._validate import check_choice, check_int
from .alpha_beta import fit_alpha_beta

__all__ = [
    "alpha_beta_holdout",
    "bench_vs_plain_loop",
    "measure_cost_per_item",
    "measure_matmul_flops",
    "measure_stream_bandwidth",
]

_DTYPES = ("float32", "float64", "bfloat16", "float16")


def _device(device: str):
    import torch

    check_choice("device", device, ("cpu", "cuda"))
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' is not allowed here: no CUDA GPU is visible")
    return torch.device(device)


def _sync(dev) -> None:
    if dev.type == "cuda":
        import torch

        torch.cuda.synchronize(dev)


def _best_time(fn, dev, repeats: int, inner: int) -> float:
    """Best seconds per call of ``fn`` over ``repeats`` blocks of ``inner`` calls."""
    fn()  # warm-up: allocation, thread-pool start, kernel selection
    _sync(dev)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        _sync(dev)
        best = min(best, (time.perf_counter() - t0) / inner)
    return best


def measure_matmul_flops(
    sizes=(256, 512), dtype: str = "float32", device: str = "cpu", repeats: int = 5
) -> pd.DataFrame:
    """Time square matrix multiplies ``C = A @ B`` and report FLOP/s.

    Args:
        sizes: matrix orders n, each in [16, 32768]; one row per size.
        dtype: ``float32``, ``float64``, ``bfloat16`` or ``float16``.
        device: ``"cpu"`` or ``"cuda"``.
        repeats: timed blocks per size, in [1, 100]; the best is kept.

    Returns:
        A DataFrame with columns ``n, dtype, device, flop, time_s, flop_per_s``
        (``flop = 2 n³``).
    """
    import torch

    dev = _device(device)
    check_choice("dtype", dtype, _DTYPES)
    check_int("repeats", repeats, 1, 100)
    sizes = [check_int(f"sizes[{i}]", s, 16, 32768) for i, s in enumerate(sizes)]
    rows = []
    for n in sizes:
        a = torch.randn(n, n, device=dev).to(getattr(torch, dtype))
        b = torch.randn(n, n, device=dev).to(getattr(torch, dtype))
        c = torch.empty_like(a)
        flop = 2.0 * n**3
        inner = max(1, int(2e8 // flop))  # about 0.1 s of work per block on a CPU
        t = _best_time(lambda a=a, b=b, c=c: torch.mm(a, b, out=c), dev, repeats, inner)
        rows.append((n, dtype, dev.type, flop, t, flop / t))
    return pd.DataFrame(
        rows, columns=["n", "dtype", "device", "flop", "time_s", "flop_per_s"]
    )


def measure_stream_bandwidth(
    sizes_bytes=(2**22, 2**25), device: str = "cpu", repeats: int = 5
) -> pd.DataFrame:
    """Time a copy ``dst[:] = src`` and report the bytes moved per second.

    A copy reads ``size`` bytes and writes ``size`` bytes, so it moves
    ``2 * size``. Buffers larger than the caches measure main memory (or HBM);
    small ones measure a cache.

    Args:
        sizes_bytes: buffer sizes in bytes, each in [1024, 2**34].
        device: ``"cpu"`` or ``"cuda"``.
        repeats: timed blocks per size, in [1, 100]; the best is kept.

    Returns:
        A DataFrame with columns ``size_bytes, device, bytes_moved, time_s, bw_Bps``.
    """
    import torch

    dev = _device(device)
    check_int("repeats", repeats, 1, 100)
    sizes = [
        check_int(f"sizes_bytes[{i}]", s, 1024, 2**34)
        for i, s in enumerate(sizes_bytes)
    ]
    rows = []
    for size in sizes:
        src = torch.ones(size // 4, dtype=torch.float32, device=dev)
        dst = torch.empty_like(src)
        moved = 2.0 * src.numel() * 4
        inner = max(1, int(2e8 // moved))
        t = _best_time(lambda s=src, d=dst: d.copy_(s), dev, repeats, inner)
        rows.append((src.numel() * 4, dev.type, moved, t, moved / t))
    return pd.DataFrame(
        rows, columns=["size_bytes", "device", "bytes_moved", "time_s", "bw_Bps"]
    )


def measure_cost_per_item(fn, items, repeats: int = 3) -> float:
    """Seconds of one core's time per item: best of ``repeats`` passes of ``fn(item)``.

    Args:
        fn: a function of one item (an event, a request).
        items: a non-empty sequence of items.
        repeats: passes over all items, in [1, 100]; the fastest pass counts.

    Returns:
        Seconds per item.
    """
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be a function of one item")
    items = list(items)
    if not items:
        raise ValueError("items=[] must hold at least one item")
    check_int("repeats", repeats, 1, 100)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for item in items:
            fn(item)
        best = min(best, time.perf_counter() - t0)
    return best / len(items)


def _plain_and_bench_worker(rank, world_size, *, size_bytes, iters, rounds):
    """Time all_reduce by a plain loop and by bench_collective's worker, interleaved."""
    import torch
    import torch.distributed as dist

    from .collectives import _bench_worker

    dev = (
        torch.device("cuda", torch.cuda.current_device())
        if dist.get_backend() == "nccl"
        else torch.device("cpu")
    )
    x = torch.ones(size_bytes // 4, device=dev)
    plain, bench = [], []
    for _ in range(rounds):  # interleaved, so both see the same machine
        for _ in range(2):
            dist.all_reduce(x)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(x)
        _sync(dev)
        plain.append((time.perf_counter() - t0) / iters)
        out = _bench_worker(
            rank,
            world_size,
            op="all_reduce",
            sizes=[size_bytes],
            iters=iters,
            warmup=2,
        )
        bench.append(out["time_s"][0])
    return min(plain), min(bench)


def bench_vs_plain_loop(
    size_bytes: int = 2**22,
    world_size: int = 2,
    iters: int = 10,
    rounds: int = 3,
    backend: str = "auto",
) -> dict:
    """Compare ``bench_collective``'s all-reduce time with a plain timing loop.

    Both run in the same process group, interleaved ``rounds`` times; each keeps
    its best round, and each is the slowest rank's time (a collective is done
    only when every rank is).

    Args:
        size_bytes: all-reduce message in bytes, in [4, 2**30].
        world_size: ranks, in [2, 64].
        iters: all-reduces per timed block, in [1, 1000].
        rounds: interleaved rounds, in [1, 20]; the best of each method is kept.
        backend: ``"auto"``, ``"gloo"`` or ``"nccl"``.

    Returns:
        ``{"plain_s", "bench_s", "bench_over_plain"}``.
    """
    from ..dist.launcher import launch

    check_int("size_bytes", size_bytes, 4, 2**30)
    check_int("world_size", world_size, 2, 64)
    check_int("iters", iters, 1, 1000)
    check_int("rounds", rounds, 1, 20)
    per_rank = launch(
        _plain_and_bench_worker,
        world_size,
        backend=backend,
        timeout=120.0,
        size_bytes=size_bytes - size_bytes % 4,
        iters=iters,
        rounds=rounds,
    )
    plain = max(p for p, _ in per_rank)
    bench = max(b for _, b in per_rank)
    return {"plain_s": plain, "bench_s": bench, "bench_over_plain": bench / plain}


def alpha_beta_holdout(df: pd.DataFrame) -> pd.DataFrame:
    """Fit alpha–beta on every other size of a sweep and predict the sizes left out.

    Args:
        df: one row per size with ``size_bytes`` and ``time_s`` (at least 4 rows),
            such as ``bench_collective`` returns.

    Returns:
        The held-out rows with ``predicted_s`` and ``rel_error`` (|measured −
        predicted| / predicted) added; the fit's ``alpha_s`` and ``beta_Bps``
        are in ``.attrs``.
    """
    if not isinstance(df, pd.DataFrame) or not {"size_bytes", "time_s"} <= set(
        df.columns
    ):
        raise ValueError("df must be a DataFrame with size_bytes and time_s columns")
    if len(df) < 4:
        raise ValueError(f"df has {len(df)} rows; at least 4 sizes are needed")
    ordered = df.sort_values("size_bytes").reset_index(drop=True)
    fit, held = ordered.iloc[::2], ordered.iloc[1::2].copy()
    alpha_s, beta_Bps = fit_alpha_beta(fit["size_bytes"], fit["time_s"])
    held["predicted_s"] = alpha_s + held["size_bytes"] / beta_Bps
    held["rel_error"] = (
        np.abs(held["time_s"] - held["predicted_s"]) / held["predicted_s"]
    )
    held.attrs.update(alpha_s=alpha_s, beta_Bps=beta_Bps)
    return held


if __name__ == "__main__":
    print(measure_matmul_flops([256, 512, 1024]).to_string(index=False))
    print(measure_stream_bandwidth([2**20, 2**24, 2**26]).to_string(index=False))
    print(bench_vs_plain_loop())
