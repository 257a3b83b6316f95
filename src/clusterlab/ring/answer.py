"""Reference solution: the all-gather half of a ring all-reduce."""

from __future__ import annotations

import torch.distributed as dist


def ring_allgather(chunks, rank: int, world_size: int):
    """Pass each finished chunk around the ring until every rank has all.

    After the reduce-scatter, rank ``r`` owns the full sum of chunk ``(r + 1) % n``.
    At step ``s`` it sends chunk ``(r + 1 - s) % n`` to its right-hand neighbour
    and receives chunk ``(r - s) % n`` from its left-hand one, overwriting its
    stale copy: after ``n - 1`` steps every chunk is final everywhere.
    """
    right, left = (rank + 1) % world_size, (rank - 1) % world_size
    for step in range(world_size - 1):
        send_idx = (rank + 1 - step) % world_size
        recv_idx = (rank - step) % world_size
        # Post the send first without waiting, so no rank blocks in a cycle.
        request = dist.isend(chunks[send_idx], right)
        dist.recv(chunks[recv_idx], left)
        request.wait()
    return chunks


__all__ = ["ring_allgather"]
