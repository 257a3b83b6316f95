"""A preflight check to run on every rank of a real job before it trains.

Run it under ``torchrun`` exactly as the job will run (same nodes, same ranks)::

    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \\
        --rdzv-endpoint node1:29500 --rdzv-id $JOB_ID \\
        -m clusterlab.debugging.preflight --json preflight.json

It measures, in a few seconds:

* each rank's matrix-multiply speed (FLOP/s over a fixed window, so a rank that
  is throttled, shared or paused part of the time shows it);
* each node's all-reduce bus bandwidth (nccl-tests' definition) among its ranks;
* point-to-point bandwidth along the ring, rank r to rank r + 1;
* the clock offset of every node against the first, NTP-style: four
  timestamps per round trip over send/recv, the round with the smallest
  delay kept; the offset is then known to within half that delay, which is
  reported as its error bound.

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
from clusterlab.debugging.timings import OUTLIER_RATIO, outliers

#: Test hook: per-node seconds added to the wall clock, "NODE=SECONDS,...".
SKEW_ENV = "CLUSTERLAB_PREFLIGHT_CLOCK_SKEW_S"


RULE = (
    f"slow: worse than the median by more than {OUTLIER_RATIO:g}x "
    "(rate < median / {r}, time > median x {r})".replace("{r}", f"{OUTLIER_RATIO:g}")
)


def clock_skews(spec: str | None) -> dict[int, float]:
    """Parse ``"NODE=SECONDS,..."`` into {node: seconds}; '' or None gives {}."""
    out: dict[int, float] = {}
    for part in (spec or "").split(","):
        if not part.strip():
            continue
        node, sep, secs = part.partition("=")
        try:
            out[int(node)] = float(secs)
        except ValueError:
            raise ValueError(
                f"{SKEW_ENV}={spec!r} must look like '1=0.25,2=-0.1' (NODE=SECONDS)"
            ) from None
        if not sep or abs(out[int(node)]) > 3600:
            raise ValueError(f"{SKEW_ENV}={spec!r}: offsets must be within ±3600 s")
    return out


def ntp_offset(t0: float, t1: float, t2: float, t3: float) -> tuple[float, float]:
    """NTP's offset and its error bound from one round trip, in seconds.

    ``t0``: the client sends (client clock); ``t1``: the server receives and
    ``t2``: it replies (server clock); ``t3``: the client receives (client
    clock). Whatever the two one-way delays, the true offset lies within
    ``delay / 2`` of the estimate, ``delay = (t3 - t0) - (t2 - t1)``.

    Returns:
        ``(offset_s, bound_s)``: the server's clock minus the client's.
    """
    delay = (t3 - t0) - (t2 - t1)
    if delay < 0:
        raise ValueError(f"delay={delay} < 0: t0..t3 must be in causal order")
    return ((t1 - t0) + (t2 - t3)) / 2, delay / 2


def _matmul_flops(n: int, window_s: float, device) -> float:
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    a @ b  # warm-up: allocation, kernel choice
    count, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < window_s:
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize()
        count += 1
    return 2.0 * n**3 * count / (time.perf_counter() - t0)


def _best_time(fn, iters: int, sync) -> float:
    fn()
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


def _ring_p2p_Bps(rank, world, nbytes, iters, device, sync) -> float | None:
    if world < 2:
        return None
    out = torch.ones(nbytes // 4, device=device)
    inbox = torch.empty_like(out)

    def exchange():
        reqs = [
            dist.isend(out, (rank + 1) % world),
            dist.irecv(inbox, (rank - 1) % world),
        ]
        for req in reqs:
            req.wait()

    return nbytes / _best_time(exchange, iters, sync)


def _clock_offsets(rank, leaders, clock, rounds, device) -> dict:
    """Rank 0 against each node's first rank: {node: (offset_s, bound_s)}."""
    found = {}
    buf = torch.zeros(2, dtype=torch.float64, device=device)
    for node, leader in sorted(leaders.items()):
        if node == 0 or rank not in (0, leader):
            continue
        best = None
        for _ in range(rounds):
            if rank == 0:
                t0 = clock()
                dist.send(buf, leader)
                dist.recv(buf, leader)
                t3 = clock()
                sample = ntp_offset(t0, float(buf[0]), float(buf[1]), t3)
                best = sample if best is None or sample[1] < best[1] else best
            else:
                dist.recv(buf, 0)
                t1 = clock()
                buf[0], buf[1] = t1, clock()
                dist.send(buf, 0)
        if rank == 0:
            found[node] = best
    return found


def report(rows, clock, links) -> dict:
    """The JSON report from every rank's measurements (pure; run on rank 0).

    Args:
        rows: per rank, ``rank``, ``node``, ``host``, ``matmul_flops``,
            ``allreduce_busbw_Bps`` (its node's; None with one rank per node).
        clock: {node: (offset_s, bound_s)} for nodes other than 0.
        links: per rank, ``p2p_Bps`` from it to the next rank (or None).

    Returns:
        The dict written by ``--json``.
    """
    ranks = sorted(rows, key=lambda r: r["rank"])
    world = len(ranks)
    slow = outliers(
        {r["rank"]: r["matmul_flops"] for r in ranks}, higher_is_worse=False
    )
    nodes = {}
    for r in ranks:
        if r["allreduce_busbw_Bps"]:
            nodes.setdefault(r["node"], r["allreduce_busbw_Bps"])
    link_rows = [
        {"src": i, "dst": (i + 1) % world, "p2p_Bps": bw}
        for i, bw in enumerate(links)
        if bw
    ]
    offsets = {"0": 0.0, **{str(n): o for n, (o, _) in clock.items()}}
    bounds = {"0": 0.0, **{str(n): b for n, (_, b) in clock.items()}}
    return {
        "ranks": [{**r, "slow": r["rank"] in slow} for r in ranks],
        "slow_ranks": slow,
        "nodes": [{"node": n, "allreduce_busbw_Bps": bw} for n, bw in nodes.items()],
        "slow_nodes": outliers(nodes, higher_is_worse=False),
        "links": link_rows,
        "slow_links": [
            f"{i}->{(i + 1) % world}"
            for i in outliers(
                {x["src"]: x["p2p_Bps"] for x in link_rows}, higher_is_worse=False
            )
        ],
        "clock_offsets_s": offsets,
        "clock_error_bounds_s": bounds,
        "rule": RULE,
    }


def _table(rep: dict) -> str:
    lines = [f"preflight of {len(rep['ranks'])} ranks; {rep['rule']}"]
    lines.append(f"{'rank':>4} {'node':>4} {'host':<16} {'matmul GFLOP/s':>15}  flag")
    for r in rep["ranks"]:
        flag = "SLOW" if r["slow"] else ""
        lines.append(
            f"{r['rank']:>4} {r['node']:>4} {r['host'][:16]:<16} "
            f"{r['matmul_flops'] / 1e9:>15.2f}  {flag}"
        )
    for n in rep["nodes"]:
        flag = "SLOW" if n["node"] in rep["slow_nodes"] else ""
        lines.append(
            f"node {n['node']}: all-reduce bus bandwidth "
            f"{n['allreduce_busbw_Bps'] / 1e9:.3f} GB/s {flag}"
        )
    for x in rep["links"]:
        flag = "SLOW" if f"{x['src']}->{x['dst']}" in rep["slow_links"] else ""
        lines.append(
            f"link {x['src']}->{x['dst']}: {x['p2p_Bps'] / 1e9:.3f} GB/s {flag}"
        )
    for node, off in rep["clock_offsets_s"].items():
        bound = rep["clock_error_bounds_s"][node]
        lines.append(
            f"node {node}: clock offset {off * 1e3:+.3f} ms ± {bound * 1e3:.3f} ms"
        )
    return "\n".join(lines)


def _args(argv):
    p = argparse.ArgumentParser(prog="python -m clusterlab.debugging.preflight")
    p.add_argument("--json", metavar="PATH", help="write the report here (rank 0)")
    p.add_argument(
        "--strict", action="store_true", help="exit 1 if anything is flagged"
    )
    p.add_argument("--max-offset-s", type=float, default=0.1, help="for --strict")
    p.add_argument("--window-s", type=float, default=0.3, help="matmul window, s")
    p.add_argument("--matmul-n", type=int, default=0, help="0: 4096 on GPU, 128 on CPU")
    p.add_argument("--bytes", type=int, default=1 << 20, help="message size, bytes")
    args = p.parse_args(argv)
    check_float("--window-s", args.window_s, 0.0, 60.0, low_inclusive=False)
    check_float("--max-offset-s", args.max_offset_s, 0.0, 3600.0)
    check_int("--matmul-n", args.matmul_n, 0, 65536)
    check_int("--bytes", args.bytes, 4, 1 << 34)
    return args


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
    rank, node = dist.get_rank(), int(os.environ.get("GROUP_RANK", "0"))
    skew = clock_skews(os.environ.get(SKEW_ENV)).get(node, 0.0)

    def clock():
        return time.time() + skew

    nodes = [None] * world
    dist.all_gather_object(nodes, node)
    members = {
        n: [r for r in range(world) if nodes[r] == n] for n in sorted(set(nodes))
    }
    groups = {
        n: dist.new_group(m) for n, m in members.items()
    }  # every rank, same order
    n_mm = args.matmul_n or (4096 if device.type == "cuda" else 128)
    dist.barrier()
    flops = _matmul_flops(n_mm, args.window_s, device)
    dist.barrier()
    busbw = _node_allreduce_Bps(
        groups[node], len(members[node]), args.bytes, 5, device, sync
    )
    dist.barrier()
    p2p = _ring_p2p_Bps(rank, world, args.bytes, 5, device, sync)
    leaders = {n: m[0] for n, m in members.items()}
    clock_found = _clock_offsets(rank, leaders, clock, 10, device)
    row = dict(
        rank=rank,
        node=node,
        host=socket.gethostname(),
        matmul_flops=flops,
        allreduce_busbw_Bps=busbw,
    )
    rows, links = [None] * world, [None] * world
    dist.all_gather_object(rows, row)
    dist.all_gather_object(links, p2p)
    status = 0
    if rank == 0:
        rep = report(rows, clock_found, links)
        print(_table(rep), flush=True)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as out:
                json.dump(rep, out, indent=1)
        off = max(abs(v) for v in rep["clock_offsets_s"].values())
        flagged = rep["slow_ranks"] or rep["slow_nodes"] or rep["slow_links"]
        status = int(args.strict and (bool(flagged) or off > args.max_offset_s))
    verdict = torch.tensor([status], device=device)
    dist.broadcast(verdict, 0)  # every rank exits alike, so torchrun reports it once
    dist.destroy_process_group()
    return int(verdict.item())


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["SKEW_ENV", "clock_skews", "main", "ntp_offset", "report"]
