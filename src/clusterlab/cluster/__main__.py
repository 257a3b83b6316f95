"""``python -m clusterlab.cluster``: a real all-reduce across emulated nodes.

::

    python -m clusterlab.cluster allreduce --nodes 2 --ranks-per-node 1 \\
        --rate-mbit 200 --size-mib 64 --json
    python -m clusterlab.cluster cleanup      # remove the book's leftovers

``allreduce`` prints one JSON object (``--json``) or one line, exits 0 and leaves
nothing behind; where this machine cannot emulate nodes it prints one sentence
saying why and exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from clusterlab.cluster.allreduce import ALGORITHMS, bus_bandwidth_Bps, timed_allreduce
from clusterlab.cluster.support import why_not


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m clusterlab.cluster")
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("allreduce", help="time an all-reduce across emulated nodes")
    a.add_argument("--nodes", type=int, default=2)
    a.add_argument("--ranks-per-node", type=int, default=1)
    a.add_argument("--rate-mbit", type=float, default=200.0)
    a.add_argument("--size-mib", type=float, default=16.0)
    a.add_argument("--algorithm", choices=ALGORITHMS, default="ring")
    a.add_argument("--reps", type=int, default=1)
    a.add_argument("--timeout", type=float, default=120.0)
    a.add_argument(
        "--launcher",
        choices=("torchrun", "fork"),
        default="torchrun",
        help="one torchrun agent per node (as on a cluster), or forked ranks",
    )
    a.add_argument("--json", action="store_true", help="print one JSON object")
    sub.add_parser("cleanup", help="remove clusters whose driver has gone")
    return p


def _validated(args):
    """(topology, size_bytes, reps) of the arguments, or ValueError naming one."""
    from clusterlab.cluster.topology import Topology
    from clusterlab.core.validate import check_float, check_int

    check_int("ranks_per_node", args.ranks_per_node, 1, 8)
    size_bytes = int(check_float("size_mib", args.size_mib, 0.0, 1024.0,
                                 low_inclusive=False) * 2**20)  # fmt: skip
    reps = check_int("reps", args.reps, 1, 20)
    check_float("timeout", args.timeout, 1.0, 3600.0)
    return Topology(nodes=args.nodes, rate_mbit=args.rate_mbit), size_bytes, reps


def allreduce(args) -> dict:
    """Build the cluster, time the all-reduce, tear down; return the record."""
    from clusterlab.cluster.emulated import EmulatedCluster
    from clusterlab.cluster.launch import launch

    topology, size_bytes, reps = _validated(args)
    with EmulatedCluster(topology) as c:
        if args.launcher == "torchrun":
            from clusterlab.cluster.agents import run_torchrun

            out = run_torchrun(c, args.ranks_per_node, "clusterlab.cluster.allreduce",
                               size_bytes, args.ranks_per_node, args.algorithm, reps,
                               timeout_s=args.timeout)  # fmt: skip
            times = [out["seconds"]]
        else:
            times = launch(
                timed_allreduce,
                ranks_per_node=args.ranks_per_node,
                cluster=c,
                timeout=args.timeout,
                size_bytes=size_bytes,
                per_node=args.ranks_per_node,
                algorithm=args.algorithm,
                reps=reps,
            )
        addresses = topology.addresses
    world = args.nodes * args.ranks_per_node
    seconds = min(max(t[i] for t in times) for i in range(reps))
    busbw = bus_bandwidth_Bps(size_bytes, seconds, world) if world > 1 else 0.0
    return {
        "nodes": args.nodes,
        "ranks_per_node": args.ranks_per_node,
        "rate_mbit": args.rate_mbit,
        "size_mib": args.size_mib,
        "algorithm": args.algorithm,
        "seconds": seconds,
        "busbw_GBps": busbw / 1e9,
        "link_GBps": args.rate_mbit * 1e6 / 8 / 1e9,
        "node_addresses": addresses,
        "launcher": args.launcher,
    }


def main(argv=None) -> int:
    """Run the command line; return the exit status."""
    args = _parser().parse_args(argv)
    if args.command == "allreduce":
        try:
            _validated(args)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    reason = why_not()
    if reason:
        print(reason, file=sys.stderr)
        return 2
    from clusterlab.cluster import names

    if args.command == "cleanup":
        gone = names.remove_leftovers()
        print(json.dumps({"removed": gone}))
        return 0
    try:
        record = allreduce(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:  # an agent or a rank failed: say which, and why
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(record))
    else:
        print(
            f"{record['nodes']} x {record['ranks_per_node']} at {args.rate_mbit:g} "
            f"Mbit/s, {args.size_mib:g} MiB {args.algorithm}: "
            f"{record['seconds']:.3f} s, bus bandwidth {record['busbw_GBps']:.4f} GB/s"
            f" (link {record['link_GBps']:.4f} GB/s)"
        )
    return 0


_DRIVER_PID = os.getpid()


def _exit_on_sigterm(signum, frame):
    """Unwind the driver, so that the cluster's teardown runs.

    pyroute2 forks short-lived helpers, which inherit this handler and which it
    stops with SIGTERM; in a helper, unwinding would run a copy of the driver's
    teardown and remove the cluster the driver is still building, so a helper
    just exits.
    """
    if os.getpid() != _DRIVER_PID:
        os._exit(128 + signum)
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    sys.exit(main())
