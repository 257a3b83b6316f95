"""Distributed checkpoints with ``torch.distributed.checkpoint`` (DCP).

With sharded training (FSDP, tensor parallelism) no rank holds the whole model,
so no rank can write it alone. DCP has every rank write its own shards, in
parallel, plus one small metadata file that says which piece of which tensor
lives where. Loading reads that map, so a checkpoint saved by one number of
ranks loads into another: each new rank reads exactly the slices it now owns.

The helpers here are thin on purpose; the lab calls ``dcp.save``/``dcp.load``
through them so that the text and the code say the same thing.
"""

from __future__ import annotations

import os

import torch
import torch._dynamo
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard, distribute_tensor

from clusterlab.core.validate import check_int


def save_checkpoint(state: dict, folder: str) -> None:
    """Every rank writes its part of ``state`` into ``folder`` (a collective)."""
    dcp.save(state, checkpoint_id=folder)


def load_checkpoint(state: dict, folder: str) -> None:
    """Every rank fills ``state`` in place from ``folder`` (a collective)."""
    dcp.load(state, checkpoint_id=folder)


def sharded_table(rows: int, cols: int, seed: int = 0) -> torch.Tensor:
    """The full tensor every DCP example shards: the same on every rank."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(rows, cols, generator=gen, dtype=torch.float64)


def dcp_save_worker(
    rank: int, world_size: int, *, folder: str, rows: int = 12, cols: int = 4
) -> dict:
    """Shard a table by rows over the ranks (a DTensor) and save it with DCP.

    Returns:
        This rank's ``local_shape`` and the ``saved_step``.
    """
    check_int("rows", rows, 1, 10**7)
    check_int("cols", cols, 1, 10**4)
    mesh = init_device_mesh("cpu", (world_size,))
    table = distribute_tensor(sharded_table(rows, cols), mesh, [Shard(0)])
    state = {"table": table, "step": 42}
    save_checkpoint(state, folder)
    return {"local_shape": tuple(table.to_local().shape), "saved_step": 42}


def dcp_load_worker(
    rank: int, world_size: int, *, folder: str, rows: int = 12, cols: int = 4
) -> dict:
    """Load the table saved by ``dcp_save_worker``, sharded over *this* world size.

    Returns:
        This rank's ``local_shape``, the whole ``table`` (gathered) and ``step``.
    """
    mesh = init_device_mesh("cpu", (world_size,))
    empty = torch.zeros(rows, cols, dtype=torch.float64)
    state = {"table": distribute_tensor(empty, mesh, [Shard(0)]), "step": -1}
    load_checkpoint(state, folder)
    table = state["table"]
    assert isinstance(table, DTensor)
    full = table.full_tensor()  # a collective: every rank must call it
    dist.barrier()
    return {
        "local_shape": tuple(table.to_local().shape),
        "table": full,
        "step": state["step"],
    }


def checkpoint_files(folder: str) -> dict:
    """File name -> size in bytes for every file of a DCP checkpoint folder."""
    return {
        name: os.path.getsize(os.path.join(folder, name))
        for name in sorted(os.listdir(folder))
    }


__all__ = [
    "checkpoint_files",
    "dcp_load_worker",
    "dcp_save_worker",
    "load_checkpoint",
    "save_checkpoint",
    "sharded_table",
]
