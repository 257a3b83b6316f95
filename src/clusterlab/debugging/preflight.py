"""A preflight check to run on every rank of a real job before it trains.

Run it under ``torchrun`` exactly as the job will run (same nodes, same ranks)::

    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \\
        --rdzv-endpoint node1:29500 --rdzv-id $JOB_ID \\
        -m clusterlab.debugging.preflight --json preflight.json

It measures, in a few seconds:

* each rank's matrix-multiply speed (FLOP/s over a fixed window, so a rank that
  is throttled, shared or paused part of the time shows it), in bfloat16 on a
  GPU that has it (the type training runs in), float32 elsewhere;
* each node's all-reduce bus bandwidth (nccl-tests' definition) among its ranks;
* point-to-point bandwidth rail by rail: local rank ``i`` of node ``n`` to
  local rank ``i`` of node ``n + 1``, all at once, so that each of a node's
  NICs carries traffic (``preflight_report.rail_peers``); with one node, the
  ring within it;
* the clock offset of every node against the first, NTP-style: four
  timestamps per round trip, the round with the smallest delay kept; the
  offset is then known to within half that delay, its reported error bound.
  The exchange runs on a gloo group of CPU tensors whatever the job's
  backend: NCCL's send and receive return before the data moves, so a
  timestamp taken after them would be taken too early.

Outliers are flagged with one stated rule, ``debugging_timings.outliers``: a
rank, node or link is slow when it is worse than the median by more than
``OUTLIER_RATIO`` (1.5 times). Rank 0 prints a table and, with ``--json PATH``,
writes ``{"ranks", "slow_ranks", "nodes", "slow_nodes", "links", "slow_links",
"clock_offsets_s", "clock_error_bounds_s", "rule"}``. With ``--strict`` the
command exits with status 1 when anything is flagged or a clock is off by more
than ``--max-offset-s``, so that a job script with ``set -e`` stops there.

For testing on one machine, ``CLUSTERLAB_PREFLIGHT_CLOCK_SKEW_S="1=0.25"``
adds 0.25 s to the wall clock of every rank of node 1 (``NODE=SECONDS``, comma
separated): the check must then report that offset, within its bound.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from clusterlab.core.backend import choose_backend
from clusterlab.core.validate import check_float, check_int
from clusterlab.debugging.preflight_report import (
    RULE,
    SKEW_ENV,
    clock_skews,
    ntp_offset,
    rail_peers,
    report,
    table,
)


def matmul_dtype(device: torch.device) -> torch.dtype:
    """bfloat16 on a GPU with bf16 tensor cores (compute capability 8+), else fp32."""
    if device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 8:
        return torch.bfloat16
    return torch.float32


def _matmul_flops(n: int, window_s: float, device) -> tuple[float, str]:
    dtype = matmul_dtype(device)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    a @ b  # warm-up: allocation, kernel choice
    if device.type == "cuda":
        torch.cuda.synchronize()
    count, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < window_s:
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize()
        count += 1
    flops = 2.0 * n**3 * count / (time.perf_counter() - t0)
    return flops, str(dtype).removeprefix("torch.")


def _best_time(fn, iters: int, sync) -> float:
    fn()
    sync()
    best = float("inf")
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def _node_allreduce_Bps(group, n_local, nbytes, iters, device, sync) -> float | None:
    if group is None or n_local < 2:
        return None
    x = torch.ones(nbytes // 4, device=device)
    t = _best_time(lambda: dist.all_reduce(x, group=group), iters, sync)
    return nbytes / t * 2 * (n_local - 1) / n_local  # bus bandwidth


def _pair_p2p_Bps(dst, src, world, nbytes, iters, device, sync) -> float | None:
    """Bytes/s this rank sends to ``dst`` while it receives from ``src``."""
    if world < 2:
        return None
    out = torch.ones(nbytes // 4, device=device)
    inbox = torch.empty_like(out)

    def exchange():
        ops = [dist.P2POp(dist.isend, out, dst), dist.P2POp(dist.irecv, inbox, src)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()

    return nbytes / _best_time(exchange, iters, sync)


def clock_group(backend: str):
    """The group the clock exchange runs on: gloo, whatever the job's backend.

    Every rank must call it, in the same order as its other ``new_group`` calls.

    Returns:
        ``None`` (the default group) when the job already runs on gloo, else a
        new gloo group of every rank.
    """
    return None if backend == "gloo" else dist.new_group(backend="gloo")


def clock_offsets(
    rank, leaders, clock, rounds=10, group=None, stamp_after_wait=True
) -> dict:
    """Rank 0 against each node's first rank: {node: (offset_s, bound_s)}.

    Args:
        rank: this process's global rank.
        leaders: {node: global rank of its first rank}.
        clock: the wall clock to read (seconds).
        rounds: round trips per node; the one with the smallest delay is kept.
        group: a gloo group (or None, the default group on gloo).
        stamp_after_wait: ``False`` stamps a receive when it is posted, before
            its data arrives, as a timestamp after an NCCL ``recv`` would be:
            the exchange then measures nothing (for tests).

    Returns:
        On rank 0, {node: (offset_s, bound_s)} for every node but 0; else {}.
    """
    check_int("rounds", rounds, 1, 10_000)
    buf = torch.zeros(2, dtype=torch.float64)  # on the CPU: gloo

    def receive(src):
        req = dist.irecv(buf, src, group=group)
        if stamp_after_wait:
            req.wait()
            return clock()
        stamp = clock()
        req.wait()
        return stamp

    found = {}
    for node, leader in sorted(leaders.items()):
        if node == 0 or rank not in (0, leader):
            continue
        best = None
        for _ in range(rounds):
            if rank == 0:
                t0 = clock()
                dist.send(buf, leader, group=group)
                t3 = receive(leader)
                sample = ntp_offset(t0, float(buf[0]), float(buf[1]), t3)
                best = sample if best is None or sample[1] < best[1] else best
            else:
                t1 = receive(0)
                buf[0], buf[1] = t1, clock()
                dist.send(buf, 0, group=group)
        if rank == 0:
            found[node] = best
    return found


def _args(argv):
    p = argparse.ArgumentParser(prog="python -m clusterlab.debugging.preflight")
    p.add_argument("--json", metavar="PATH", help="write the report here (rank 0)")
    p.add_argument(
        "--strict", action="store_true", help="exit 1 if anything is flagged"
    )
    p.add_argument("--max-offset-s", type=float, default=0.1, help="for --strict")
    p.add_argument("--window-s", type=float, default=0.3, help="matmul window, s")
    p.add_argument("--matmul-n", type=int, default=0, help="0: 8192 on GPU, 128 on CPU")
    p.add_argument("--bytes", type=int, default=1 << 20, help="message size, bytes")
    args = p.parse_args(argv)
    check_float("--window-s", args.window_s, 0.0, 60.0, low_inclusive=False)
    check_float("--max-offset-s", args.max_offset_s, 0.0, 3600.0)
    check_int("--matmul-n", args.matmul_n, 0, 65536)
    check_int("--bytes", args.bytes, 4, 1 << 34)
    return args


def _measure(args, backend, device, sync, clock, node):
    world, rank = dist.get_world_size(), dist.get_rank()
    cpu = clock_group(backend)  # first: the same order on every rank
    where = [None] * world
    local = int(os.environ.get("LOCAL_RANK", "0"))
    dist.all_gather_object(where, (node, local), group=cpu)
    nodes, locals_ = [w[0] for w in where], [w[1] for w in where]
    members = {
        n: [r for r in range(world) if nodes[r] == n] for n in sorted(set(nodes))
    }
    groups = {
        n: dist.new_group(m) for n, m in members.items()
    }  # every rank, same order
    n_mm = args.matmul_n or (8192 if device.type == "cuda" else 128)
    dist.barrier(group=cpu)
    flops, dtype = _matmul_flops(n_mm, args.window_s, device)
    dist.barrier(group=cpu)
    busbw = _node_allreduce_Bps(
        groups[node], len(members[node]), args.bytes, 5, device, sync
    )
    dist.barrier(group=cpu)
    dst, src = rail_peers(nodes, locals_)[rank]
    p2p = _pair_p2p_Bps(dst, src, world, args.bytes, 5, device, sync)
    leaders = {n: m[0] for n, m in members.items()}
    found = clock_offsets(rank, leaders, clock, 10, group=cpu)
    row = dict(
        rank=rank,
        node=node,
        local_rank=local,
        host=socket.gethostname(),
        matmul_flops=flops,
        matmul_dtype=dtype,
        allreduce_busbw_Bps=busbw,
    )
    rows, links = [None] * world, [None] * world
    dist.all_gather_object(rows, row, group=cpu)
    dist.all_gather_object(links, (dst, p2p), group=cpu)
    return rows, links, found, cpu


def main(argv=None) -> int:
    """Run the preflight on this rank; return the exit status."""
    args = _args(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    backend = choose_backend(
        int(os.environ.get("LOCAL_WORLD_SIZE", world)), verbose=False
    )
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    dist.init_process_group(backend, timeout=timedelta(seconds=60))
    node = int(os.environ.get("GROUP_RANK", "0"))
    skew = clock_skews(os.environ.get(SKEW_ENV)).get(node, 0.0)

    def clock():
        return time.time() + skew

    rows, links, found, cpu = _measure(args, backend, device, sync, clock, node)
    status = 0
    if dist.get_rank() == 0:
        rep = report(rows, found, links)
        print(table(rep), flush=True)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as out:
                json.dump(rep, out, indent=1)
        off = max(abs(v) for v in rep["clock_offsets_s"].values())
        flagged = rep["slow_ranks"] or rep["slow_nodes"] or rep["slow_links"]
        status = int(args.strict and (bool(flagged) or off > args.max_offset_s))
    verdict = torch.tensor([status])
    dist.broadcast(verdict, 0, group=cpu)  # every rank exits alike
    dist.destroy_process_group()
    return int(verdict.item())


if __name__ == "__main__":
    sys.exit(main())


__all__ = [
    "RULE",
    "SKEW_ENV",
    "clock_group",
    "clock_offsets",
    "clock_skews",
    "main",
    "matmul_dtype",
    "ntp_offset",
    "rail_peers",
    "report",
]
