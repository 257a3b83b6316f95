"""Benchmarking collectives the way nccl-tests does, on whatever backend is here.

For each message size every rank runs a few untimed warm-up iterations, meets
the others at a barrier, then times ``iters`` back-to-back operations; this is
repeated ``repeats`` times and the best (lowest) mean is kept, since noise on a
shared machine only ever adds time. The reported time is the slowest rank's
(a collective is done only when every rank is done). From it come the two
bandwidths of nccl-tests' ``doc/PERFORMANCE.md``:

* ``algbw = size / time``, what the application sees;
* ``busbw = algbw * factor``, the rate each link must sustain, which makes
  different operations and world sizes comparable with the hardware's peak.

Run it from a shell: ``python -m clusterlab.perf.collectives``.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from .._validate import check_choice, check_int
from ..dist.backend import MAX_WORLD_SIZE
from ..dist.launcher import launch

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "ping_pong")
#: Bus-bandwidth factors of nccl-tests' PERFORMANCE.md, as functions of n ranks.
BUSBW_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "ping_pong": lambda n: 1.0,
}
MAX_BYTES = 2**31
_ELEMENT_BYTES = 4  # float32


def busbw_factor(op: str, world_size: int) -> float:
    """The factor that turns algbw into busbw for ``op`` on ``world_size`` ranks."""
    check_choice("op", op, OPS)
    check_int("world_size", world_size, 1, MAX_WORLD_SIZE)
    return float(BUSBW_FACTORS[op](world_size))


def default_iters(size_bytes: int) -> tuple[int, int]:
    """Iterations and warm-ups for one size: many for small messages, few for large."""
    iters = int(np.clip(2**26 // max(size_bytes, 1), 5, 100))
    return iters, max(2, iters // 5)


def bench_collective(
    op: str,
    sizes,
    world_size: int,
    backend: str = "auto",
    iters: int | None = None,
    warmup: int | None = None,
    timeout: float = 120.0,
    repeats: int = 3,
) -> pd.DataFrame:
    """Time ``op`` for each message size on a real process group.

    Args:
        op: one of ``all_reduce``, ``all_gather``, ``reduce_scatter``,
            ``broadcast`` or ``ping_pong`` (rank 0 to rank 1 and back; needs 2 ranks).
        sizes: message sizes in bytes, each in [4, 2**31]; rounded up to whole
            float32 elements (and to a multiple of the world size where the op
            splits the buffer). For all-gather it is the gathered output, for
            reduce-scatter the input, as in nccl-tests.
        world_size: number of ranks, in [1, 64] (exactly 2 for ``ping_pong``).
        backend: ``"auto"``, ``"gloo"`` or ``"nccl"``.
        iters: timed iterations per size, in [1, 10000]; default adapts to size.
        warmup: untimed iterations before timing, in [0, 1000]; default iters / 5.
        timeout: the launch's timeout in seconds.
        repeats: timed blocks of ``iters`` per size, in [1, 100]; the best is kept.

    Returns:
        A DataFrame with one row per size and the columns ``op, size_bytes,
        world_size, backend, time_s, algbw_Bps, busbw_Bps`` (plus ``iters``).
    """
    check_choice("op", op, OPS)
    check_int("world_size", world_size, 1, MAX_WORLD_SIZE)
    if op == "ping_pong" and world_size != 2:
        raise ValueError(
            f"world_size={world_size} is not allowed for op='ping_pong': "
            "a ping-pong runs between exactly 2 ranks"
        )
    try:
        raw = np.atleast_1d(np.asarray(sizes)).tolist()
    except (TypeError, ValueError):
        raise ValueError(f"sizes={sizes!r} must be a sequence of byte counts") from None
    if not raw:
        raise ValueError("sizes=[] must hold at least one message size in bytes")
    sizes = [
        check_int(f"sizes[{i}]", s, _ELEMENT_BYTES, MAX_BYTES)
        for i, s in enumerate(raw)
    ]
    if iters is not None:
        check_int("iters", iters, 1, 10_000)
    if warmup is not None:
        check_int("warmup", warmup, 0, 1_000)
    check_int("repeats", repeats, 1, 100)
    per_rank = launch(
        _bench_worker,
        world_size,
        backend=backend,
        timeout=timeout,
        op=op,
        sizes=sizes,
        iters=iters,
        warmup=warmup,
        repeats=repeats,
    )
    rows = []
    for i, size_bytes in enumerate(per_rank[0]["size_bytes"]):
        time_s = max(r["time_s"][i] for r in per_rank)
        algbw = size_bytes / time_s
        rows.append(
            {
                "op": op,
                "size_bytes": size_bytes,
                "world_size": world_size,
                "backend": per_rank[0]["backend"],
                "time_s": time_s,
                "algbw_Bps": algbw,
                "busbw_Bps": algbw * busbw_factor(op, world_size),
                "iters": per_rank[0]["iters"][i],
            }
        )
    return pd.DataFrame(rows)


def _elements(op: str, size_bytes: int, world_size: int) -> int:
    count = -(-size_bytes // _ELEMENT_BYTES)
    if op in ("all_gather", "reduce_scatter"):
        count = -(-count // world_size) * world_size
    return count


def _bench_worker(rank, world_size, *, op, sizes, iters, warmup, repeats=1):
    """Runs in every rank: time ``op`` for each size; return this rank's timings."""
    import torch
    import torch.distributed as dist

    backend = dist.get_backend()
    device = (
        torch.device("cuda", torch.cuda.current_device())
        if backend == "nccl"
        else torch.device("cpu")
    )
    out = {"backend": backend, "size_bytes": [], "time_s": [], "iters": []}
    for size_bytes in sizes:
        count = _elements(op, size_bytes, world_size)
        n_iter, n_warm = default_iters(count * _ELEMENT_BYTES)
        n_iter = iters or n_iter
        n_warm = n_warm if warmup is None else warmup
        step = _make_step(op, count, rank, world_size, device)
        for _ in range(n_warm):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = float("inf")
        for _ in range(repeats):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(n_iter):
                step()
            if device.type == "cuda":
                torch.cuda.synchronize()
            best = min(best, time.perf_counter() - t0)
        per_op = best / n_iter / (2 if op == "ping_pong" else 1)
        out["size_bytes"].append(count * _ELEMENT_BYTES)
        out["time_s"].append(per_op)
        out["iters"].append(n_iter)
    return out


def _make_step(op, count, rank, world_size, device):
    """Return a zero-argument function that performs one ``op`` on fresh buffers."""
    import torch
    import torch.distributed as dist

    buf = torch.ones(count, dtype=torch.float32, device=device)
    if op == "all_reduce":
        return lambda: dist.all_reduce(buf)
    if op == "broadcast":
        return lambda: dist.broadcast(buf, src=0)
    if op == "all_gather":
        shard = buf[: count // world_size].clone()
        return lambda: dist.all_gather_into_tensor(buf, shard)
    if op == "reduce_scatter":
        shard = torch.empty(count // world_size, dtype=buf.dtype, device=device)
        return lambda: dist.reduce_scatter_tensor(shard, buf)
    peer = 1 - rank  # ping_pong: 0 sends and waits for the echo; 1 echoes

    def ping_pong():
        if rank == 0:
            dist.send(buf, peer)
            dist.recv(buf, peer)
        else:
            dist.recv(buf, peer)
            dist.send(buf, peer)

    return ping_pong


if __name__ == "__main__":
    table = bench_collective("all_reduce", [2**k for k in range(10, 25, 2)], 2)
    print(table.to_string(index=False))
