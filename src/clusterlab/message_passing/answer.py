"""Reference solution: reduce to rank 0, then broadcast the total."""

from __future__ import annotations

import torch
import torch.distributed as dist


def reduce_then_broadcast(
    tensor: torch.Tensor, rank: int, world_size: int
) -> torch.Tensor:
    """Sum every rank's tensor with send/recv only, and give every rank the sum.

    Rank 0 receives from each other rank in turn and adds (the reduce), then sends
    the total back to each of them (the broadcast): 2(n - 1) messages, all through
    rank 0, where a ring needs no such hot spot.
    """
    total = tensor.clone()
    if rank == 0:
        incoming = torch.empty_like(tensor)
        for src in range(1, world_size):
            dist.recv(incoming, src)
            total += incoming
        for dst in range(1, world_size):
            dist.send(total, dst)
    else:
        dist.send(tensor, 0)
        dist.recv(total, 0)
    return total


__all__ = ["reduce_then_broadcast"]
