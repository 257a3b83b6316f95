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

``bench_vs_plain_loop`` checks the benchmark against itself: it times
``dist.all_reduce`` in a plain loop and with ``bench_collective``'s own worker
*in the same process group*, interleaved.

Run it from a shell: ``python -m clusterlab.core.bench``.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from clusterlab.core.backend import MAX_WORLD_SIZE
from clusterlab.core.launcher import launch
from clusterlab.core.validate import check_choice, check_int

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


def _group_device():
    """Where this rank's buffers live: its current GPU under NCCL, else the CPU."""
    import torch
    import torch.distributed as dist

    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _sync(device) -> None:
    """Wait for queued GPU work, so a timer stops when the work is done."""
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def time_in_group(step, iters: int = 1, repeats: int = 5, warmup: int = 1) -> float:
    """Inside a rank: best seconds per call of ``step()``, every rank starting together.

    ``warmup`` untimed calls first; then ``repeats`` blocks, each opened by a
    barrier so that no rank starts early, of ``iters`` calls each, closed by
    a GPU synchronise when the group runs NCCL. Noise only ever adds time, so
    the best block is kept. A collective is done only when every rank is, so
    the caller takes the slowest rank's result.

    Args:
        step: a function of no arguments (one collective, one matmul, …).
        iters: calls per timed block, in [1, 100000].
        repeats: timed blocks, in [1, 1000].
        warmup: untimed calls before the first block, in [0, 1000].
    """
    import torch.distributed as dist

    check_int("iters", iters, 1, 100_000)
    check_int("repeats", repeats, 1, 1000)
    check_int("warmup", warmup, 0, 1000)
    device = _group_device()
    for _ in range(warmup):
        step()
    _sync(device)
    best = float("inf")
    for _ in range(repeats):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return best / iters


def _bench_worker(rank, world_size, *, op, sizes, iters, warmup, repeats=1):
    """Runs in every rank: time ``op`` for each size; return this rank's timings."""
    import torch.distributed as dist

    backend = dist.get_backend()
    device = _group_device()
    out = {"backend": backend, "size_bytes": [], "time_s": [], "iters": []}
    for size_bytes in sizes:
        count = _elements(op, size_bytes, world_size)
        n_iter, n_warm = default_iters(count * _ELEMENT_BYTES)
        n_iter = iters or n_iter
        n_warm = n_warm if warmup is None else warmup
        step = _make_step(op, count, rank, world_size, device)
        best = time_in_group(step, n_iter, repeats, n_warm)
        per_op = best / (2 if op == "ping_pong" else 1)
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

    def ping_pong():  # 0 sends and waits for the echo; 1 echoes; others idle
        if rank == 0:
            dist.send(buf, 1)
            dist.recv(buf, 1)
        elif rank == 1:
            dist.recv(buf, 0)
            dist.send(buf, 0)

    return ping_pong


def _plain_and_bench_worker(rank, world_size, *, size_bytes, iters, rounds):
    """Time all_reduce by a plain loop and by bench_collective's worker, interleaved."""
    import torch
    import torch.distributed as dist

    dev = _group_device()
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
        out = _bench_worker(  # a global, looked up at call time
            rank,
            world_size,
            op="all_reduce",
            sizes=[size_bytes],
            iters=iters,
            warmup=2,
        )
        bench.append(out["time_s"][0])
    return min(plain), min(bench)


def _launch_interleaved(
    worker, size_bytes, world_size, iters, rounds, backend, *, per_rank=0
):
    """Check the arguments of an interleaved comparison, then run ``worker``.

    ``size_bytes`` must be at least 4 bytes, and at least ``per_rank`` bytes for
    each rank; it is rounded down to whole float32 elements.
    """
    world_size = check_int("world_size", world_size, 2, 64)
    check_int("size_bytes", size_bytes, max(4, per_rank * world_size), 2**30)
    check_int("iters", iters, 1, 1000)
    check_int("rounds", rounds, 1, 20)
    return launch(
        worker,
        world_size,
        backend=backend,
        timeout=120.0,
        size_bytes=size_bytes - size_bytes % 4,
        iters=iters,
        rounds=rounds,
    )


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
    per_rank = _launch_interleaved(
        _plain_and_bench_worker, size_bytes, world_size, iters, rounds, backend
    )
    plain = max(p for p, _ in per_rank)
    bench = max(b for _, b in per_rank)
    return {"plain_s": plain, "bench_s": bench, "bench_over_plain": bench / plain}


def _ring_parts_worker(rank, world_size, *, size_bytes, iters, rounds):
    """Time an all-reduce and the parts a ring builds it from, interleaved.

    Each round times, in the same group and one after another: the all-reduce
    of ``size_bytes``; one ring step (every rank sends ``size_bytes / n`` to its
    right-hand neighbour while it receives as much from its left); the addition
    of one such chunk into another; and a one-way message of a chunk from rank
    0 to rank 1 (half a ping-pong). Each keeps its best round.
    """
    import torch
    import torch.distributed as dist

    dev = _group_device()
    n = world_size
    count = size_bytes // _ELEMENT_BYTES
    chunk = -(-count // n)
    full = torch.ones(count, device=dev)
    send = torch.ones(chunk, device=dev)
    got = torch.empty(chunk, device=dev)
    acc = torch.ones(chunk, device=dev)
    right, left = (rank + 1) % n, (rank - 1) % n

    def ring_step():
        sent = dist.isend(send, right)
        dist.recv(got, left)
        sent.wait()

    parts = {
        "allreduce_s": lambda: dist.all_reduce(full),
        "step_s": ring_step,
        "add_s": lambda: acc.add_(got),
        "one_way_s": _make_step("ping_pong", chunk, rank, n, dev),  # there and back
    }
    best = dict.fromkeys(parts, float("inf"))
    for _ in range(rounds):  # interleaved, so every part sees the same machine
        for name, step in parts.items():
            t = time_in_group(step, iters, repeats=1, warmup=1)
            best[name] = min(best[name], t)
    best["one_way_s"] /= 2
    return best


def ring_parts(
    size_bytes: int = 2**22,
    world_size: int = 2,
    iters: int = 5,
    rounds: int = 5,
    backend: str = "auto",
) -> dict:
    """Time an all-reduce and the parts a ring all-reduce is made of.

    A ring all-reduce over *n* ranks is 2(n - 1) ring steps, in each of which
    every rank sends S/n bytes to one neighbour *while* it receives S/n from the
    other, and n - 1 additions of a received chunk. This times each part on the
    machine, interleaved with the all-reduce itself in the same process group,
    so the collective can be predicted from its parts. It also times a chunk
    sent one way at a time (half a ping-pong): on a full-duplex link a ring step
    costs as much as that; where both directions share one resource (loopback
    TCP: the same cores copy both ways) it costs up to twice as much.

    Args:
        size_bytes: the all-reduce's message in bytes, in [4 * world_size, 2**30].
        world_size: ranks, in [2, 64].
        iters: operations per timed block, in [1, 1000].
        rounds: interleaved rounds, in [1, 20]; each part keeps its best.
        backend: ``"auto"``, ``"gloo"`` or ``"nccl"``.

    Returns:
        ``{"allreduce_s", "step_s", "add_s", "one_way_s", "size_bytes",
        "world_size"}``, each time the slowest rank's best, in seconds.
    """
    per_rank = _launch_interleaved(
        _ring_parts_worker, size_bytes, world_size, iters, rounds, backend, per_rank=4
    )
    out = {k: max(r[k] for r in per_rank) for k in per_rank[0]}
    return dict(out, size_bytes=size_bytes - size_bytes % 4, world_size=world_size)


if __name__ == "__main__":
    table = bench_collective("all_reduce", [2**k for k in range(10, 25, 2)], 2)
    print(table.to_string(index=False))
    print(bench_vs_plain_loop())
