"""Measuring the two roofs of this machine: matmul FLOP/s and streaming bytes/s.

The roofline needs two numbers per processor: the arithmetic rate it reaches
on a large matrix multiply (compute-bound), and the byte rate it reaches on a
large copy (memory-bound, like the *Copy* kernel of McCalpin's STREAM). Both are
timed as the best of several repeats, since noise on a shared machine only adds
time. On a GPU every timing ends with ``torch.cuda.synchronize()``, because
CUDA calls return before the work is done.

Run it from a shell: ``python -m clusterlab.roofline.measure``.
"""

from __future__ import annotations

import time

import pandas as pd

from clusterlab.core.validate import check_choice, check_int

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


if __name__ == "__main__":
    print(measure_matmul_flops([256, 512, 1024]).to_string(index=False))
    print(measure_stream_bandwidth([2**20, 2**24, 2**26]).to_string(index=False))


__all__ = ["measure_cost_per_item", "measure_matmul_flops", "measure_stream_bandwidth"]
