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


def _fsdp_model(world_size: int, seed: int = 0):
    """A small MLP, seeded alike on every rank, sharded with FSDP2 over the world."""
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(24, 48), torch.nn.ReLU(), torch.nn.Linear(48, 24)
    )
    mesh = init_device_mesh("cpu", (world_size,))
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def _train_step(model, optim, rank: int, step: int) -> None:
    gen = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(8, 24, generator=gen)
    loss = (model(x) - x).pow(2).mean()
    loss.backward()
    optim.step()
    optim.zero_grad()


def _full_state(model, optim) -> dict:
    """Every parameter and optimizer tensor, whole, keyed by name (a collective)."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_state_dict,
    )

    opts = StateDictOptions(full_state_dict=True)
    msd, osd = get_state_dict(model, optim, options=opts)
    out = {f"model.{k}": v.detach().clone() for k, v in msd.items()}
    for name, st in osd["state"].items():
        for k, v in st.items():
            if torch.is_tensor(v):
                out[f"optim.{name}.{k}"] = v.detach().clone()
    return out


def fsdp_save_worker(
    rank: int, world_size: int, *, folder: str, steps: int = 3, mode: str = "async"
) -> dict:
    """Train an FSDP model a few steps, then save model and optimizer with DCP.

    ``mode="async"`` uses ``dcp.async_save``: the call returns once the shards
    are staged in memory, and one more training step runs while they are
    written; ``"sync"`` blocks on ``dcp.save``.

    Returns:
        ``full`` (every tensor, whole, as saved), ``blocked_s`` (the time the
        training loop waited for the save), ``step_s`` (a training step).
    """
    import time

    from torch.distributed.checkpoint.state_dict import get_state_dict

    check_int("steps", steps, 1, 1000)
    if mode not in ("async", "sync"):
        raise ValueError(f"mode={mode!r} must be 'async' or 'sync'")
    model, optim = _fsdp_model(world_size)
    for step in range(steps):
        t0 = time.perf_counter()
        _train_step(model, optim, rank, step)
        step_s = time.perf_counter() - t0
    full = _full_state(model, optim)
    msd, osd = get_state_dict(model, optim)
    state = {"model": msd, "optim": osd}
    t0 = time.perf_counter()
    if mode == "async":
        # the save's own collectives run in a background thread: they get a
        # process group of their own, apart from the training's
        group = dist.new_group(backend="gloo")
        t0 = time.perf_counter()
        pending = dcp.async_save(state, checkpoint_id=folder, process_group=group)
        blocked_s = time.perf_counter() - t0
        _train_step(model, optim, rank, steps)  # training goes on meanwhile
        pending.result()
    else:
        dcp.save(state, checkpoint_id=folder)
        blocked_s = time.perf_counter() - t0
    dist.barrier()
    return {"full": full, "blocked_s": blocked_s, "step_s": step_s}


def fsdp_load_worker(rank: int, world_size: int, *, folder: str) -> dict:
    """Load model and optimizer saved at another world size into FSDP at this one.

    Returns:
        ``full``: every tensor, whole, after the load; ``local_rows``: the rows of
        the first layer's weight this rank holds.
    """
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model, optim = _fsdp_model(world_size, seed=1)  # other weights, to be replaced
    msd, osd = get_state_dict(model, optim)
    state = {"model": msd, "optim": osd}
    dcp.load(state, checkpoint_id=folder)
    set_state_dict(
        model, optim, model_state_dict=state["model"], optim_state_dict=state["optim"]
    )
    rows = model[0].weight.to_local().shape[0]
    return {"full": _full_state(model, optim), "local_rows": rows}


def checkpoint_files(folder: str) -> dict:
    """File name -> size in bytes for every file of a DCP checkpoint folder."""
    return {
        name: os.path.getsize(os.path.join(folder, name))
        for name in sorted(os.listdir(folder))
    }


__all__ = [
    "checkpoint_files",
    "fsdp_load_worker",
    "fsdp_save_worker",
    "dcp_load_worker",
    "dcp_save_worker",
    "load_checkpoint",
    "save_checkpoint",
    "sharded_table",
]
