"""A timed all-reduce across emulated nodes: the flat ring or the hierarchical one.

``timed_allreduce`` runs on every rank of a launch whose ranks are placed
``ranks_per_node`` to a node (rank ``r`` on node ``r // ranks_per_node``):

* ``ring``: one all-reduce over every rank (gloo's ring), which crosses the
  links between nodes with ``2 (p - 1) / p`` of the buffer per link direction;
* ``hierarchical``: an all-reduce inside each node (its loopback), an
  all-reduce of one shard per local rank across the nodes, and an all-gather
  inside the node, so each link carries only ``2 (N - 1) / N`` of the buffer.

Both are checked against the exact sum before anything is timed.
"""

from __future__ import annotations

import time

ALGORITHMS = ("ring", "hierarchical")


def _groups(world_size: int, per_node: int):
    import torch.distributed as dist

    nodes = world_size // per_node
    inside = [dist.new_group(list(range(n * per_node, (n + 1) * per_node)))
              for n in range(nodes)]  # fmt: skip
    across = [dist.new_group(list(range(lr, world_size, per_node)))
              for lr in range(per_node)]  # fmt: skip
    return inside, across


def _hierarchical(x, rank, per_node, inside, across):
    import torch
    import torch.distributed as dist

    node, local = divmod(rank, per_node)
    if per_node > 1:
        dist.all_reduce(x, group=inside[node])
    shards = list(torch.chunk(x, per_node))
    mine = shards[local].clone()
    if dist.get_world_size(across[local]) > 1:
        dist.all_reduce(mine, group=across[local])
    if per_node > 1:
        out = [torch.empty_like(s) for s in shards]
        dist.all_gather(out, mine, group=inside[node])
        x.copy_(torch.cat(out))
    else:
        x.copy_(mine)


def timed_allreduce(
    rank: int,
    world_size: int,
    *,
    size_bytes: int,
    per_node: int,
    algorithm: str,
    reps: int = 1,
) -> list[float]:
    """Seconds of each of ``reps`` timed all-reduces of ``size_bytes`` (float32).

    Args:
        rank, world_size: this rank and the group's size.
        size_bytes: the buffer, bytes (rounded down to a multiple of 4 per rank).
        per_node: ranks on each node (rank r is on node r // per_node).
        algorithm: ``"ring"`` or ``"hierarchical"``.
        reps: timed repetitions after one checked warm-up.

    Returns:
        The wall-clock seconds of each repetition, barrier to barrier.
    """
    import torch
    import torch.distributed as dist

    n = max(per_node, size_bytes // 4 // per_node * per_node)
    inside, across = _groups(world_size, per_node)

    def run(x):
        if algorithm == "ring":
            dist.all_reduce(x)
        else:
            _hierarchical(x, rank, per_node, inside, across)

    x = torch.full((n,), float(rank + 1))
    run(x)
    want = world_size * (world_size + 1) / 2
    if not torch.all(x == want):
        raise AssertionError(f"{algorithm} all-reduce gave {x[:4]}..., not {want}")
    times = []
    for _ in range(reps):
        x.fill_(1.0)
        dist.barrier()
        t0 = time.perf_counter()
        run(x)
        dist.barrier()
        times.append(time.perf_counter() - t0)
    return times


def bus_bandwidth_Bps(size_bytes: float, seconds: float, world_size: int) -> float:
    """nccl-tests' bus bandwidth of an all-reduce: ``S 2 (p - 1) / p / t``."""
    return size_bytes * 2 * (world_size - 1) / world_size / seconds


def main(argv=None) -> int:
    """One rank under torchrun: time the all-reduce, rank 0 prints the seconds.

    Usage (started by ``agents.run_torchrun``, one agent per node)::

        python -m clusterlab.cluster.allreduce SIZE_BYTES PER_NODE ALGORITHM REPS
    """
    import json
    import os
    import sys
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    size_bytes, per_node, algorithm, reps = (argv or sys.argv[1:])[:4]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    times = timed_allreduce(rank, world, size_bytes=int(size_bytes),
                            per_node=int(per_node), algorithm=algorithm,
                            reps=int(reps))  # fmt: skip
    gathered = [None] * world
    dist.all_gather_object(gathered, times)
    if rank == 0:
        slowest = [max(t[i] for t in gathered) for i in range(int(reps))]
        print("RESULT " + json.dumps({"seconds": slowest, "host": os.uname()[1]}))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
