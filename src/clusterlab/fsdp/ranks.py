"""Fully sharded data parallelism (FSDP2, ZeRO stage 3), measured byte by byte.

``fully_shard`` splits every parameter along its first dimension over the ranks
of a device mesh: each rank keeps one shard (a ``DTensor`` whose ``to_local()``
is the slice it stores), gathers a whole layer only while it computes with it,
and reduce-scatters the gradients so that each rank keeps only its shard of
those too. The optimizer then builds its state (Adam's two moments) from the
shards alone. ``fsdp_memory_worker`` trains a small MLP this way and counts the
bytes each rank holds; ``measure_fsdp_memory`` runs it for several world sizes
and ``fsdp_vs_formula`` sets the counts beside ZeRO-3's formula from
``clusterlab.models.memory``.

Run it from a shell (gloo on CPUs, NCCL when every rank has a GPU)::

    python -m clusterlab.fsdp.ranks
"""

from __future__ import annotations

import pandas as pd
import torch
import torch._dynamo
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from clusterlab.core.backend import MAX_WORLD_SIZE
from clusterlab.core.launcher import launch
from clusterlab.core.validate import check_float, check_int
from clusterlab.data_parallel.ranks import (
    dp_batch,
    dp_mlp,
    one_thread_per_rank,
    rank_device,
)
from clusterlab.models.data_parallel import STATE_KINDS as FSDP_KINDS


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def local_bytes(tensors) -> tuple[int, int]:
    """Bytes of this rank's shards of ``tensors``: stored elements, and allocated.

    Args:
        tensors: tensors or DTensors (``None`` entries are skipped).

    Returns:
        ``(used, allocated)``: bytes of the local elements, and bytes of the
        distinct storages that hold them. FSDP2 pads a shard when the first
        dimension does not divide by the world size, and keeps a layer's
        gradient shards in one shared buffer; ``allocated`` sees both.
    """
    used, storages = 0, {}
    for t in tensors:
        if t is None:
            continue
        loc = _local(t)
        used += loc.numel() * loc.element_size()
        storage = loc.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
    return used, sum(storages.values())


def _shard(model: torch.nn.Sequential, world_size: int, device: torch.device):
    mesh = init_device_mesh(device.type, (world_size,))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)  # one all-gather unit per layer
    fully_shard(model, mesh=mesh)
    return model


def fsdp_memory_worker(
    rank: int,
    world_size: int,
    *,
    width: int = 256,
    depth: int = 2,
    steps: int = 1,
    batch_per_rank: int = 8,
    seed: int = 0,
    lr: float = 1e-3,
    return_params: bool = False,
) -> dict:
    """Train ``dp_mlp(width, depth)`` under FSDP2 with Adam; count this rank's bytes.

    Run it with ``cl.launch(fsdp_memory_worker, n, ...)``. Weights,
    gradients and optimizer state stay fp32, so the formula's bytes per
    parameter are 4 + 4 + 8 (Adam's ``exp_avg`` and ``exp_avg_sq``).

    Args:
        rank, world_size: given by the launcher.
        width, depth: the MLP's shape; a ``width`` that divides by the world size
            gives equal shards with no padding.
        steps: Adam steps before counting, in [1, 1000].
        batch_per_rank: rows of each global batch per rank, in [1, 65536].
        seed: seeds the weights and the data.
        lr: Adam's learning rate, in (0, 1].
        return_params: also gather and return the full weights (flat float64).

    Returns:
        dict with ``n_params`` (whole model), ``weights_bytes``, ``grads_bytes``,
        ``optimizer_bytes`` (this rank's local elements) and the same with
        ``_alloc`` (storage including padding); ``params`` if asked.
    """
    steps = check_int("steps", steps, 1, 1000)
    batch_per_rank = check_int("batch_per_rank", batch_per_rank, 1, 65536)
    lr = check_float("lr", lr, 0.0, 1.0, low_inclusive=False)
    one_thread_per_rank()
    device = rank_device(rank)
    model = dp_mlp(width, depth, seed).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    model = _shard(model, world_size, device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for step in range(steps):
        x, y = (
            t.to(device)
            for t in dp_batch(step, rank, world_size, batch_per_rank, width, seed)
        )
        opt.zero_grad(set_to_none=False)  # keep gradients, to count them after
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    params = list(model.parameters())
    state = [t for s in opt.state.values() for t in s.values() if torch.is_tensor(t)]
    out = {"rank": rank, "world_size": world_size, "n_params": n_params}
    for kind, tensors in zip(
        FSDP_KINDS, (params, [p.grad for p in params], state), strict=True
    ):
        out[f"{kind}_bytes"], out[f"{kind}_alloc_bytes"] = local_bytes(tensors)
    if return_params:
        full = [p.full_tensor() for p in params]  # a collective: every rank calls it
        out["params"] = torch.cat([f.reshape(-1).double().cpu() for f in full])
    return out


def measure_fsdp_memory(
    world_sizes=(1, 2, 4), *, width: int = 256, depth: int = 2, steps: int = 1
) -> pd.DataFrame:
    """Launch ``fsdp_memory_worker`` for each world size; one row per rank and kind.

    Args:
        world_sizes: ranks per run, each in [1, 64].
        width, depth, steps: passed to the worker.

    Returns:
        Tidy DataFrame: ``world_size, rank, kind, bytes, alloc_bytes, n_params``.
    """
    rows = []
    for n in world_sizes:
        n = check_int("world_sizes", n, 1, MAX_WORLD_SIZE)
        results = launch(fsdp_memory_worker, n, width=width, depth=depth, steps=steps)
        for r in results:
            for kind in FSDP_KINDS:
                rows.append(
                    {
                        "world_size": n,
                        "rank": r["rank"],
                        "kind": kind,
                        "bytes": r[f"{kind}_bytes"],
                        "alloc_bytes": r[f"{kind}_alloc_bytes"],
                        "n_params": r["n_params"],
                    }
                )
    return pd.DataFrame(rows)


def fsdp_vs_formula(measured: pd.DataFrame) -> pd.DataFrame:
    """The busiest rank's bytes per kind beside ZeRO-3's formula (fp32 Adam).

    Args:
        measured: ``measure_fsdp_memory``'s DataFrame.

    Returns:
        DataFrame ``world_size, kind, measured_bytes, formula_bytes, ratio``
        (kind ``total`` included); the formula is
        ``training_memory(n, dp=world_size, zero_stage=3, weight_bytes=4,
        grad_bytes=4, optimizer_bytes=8)``.
    """
    from clusterlab.models.memory import training_memory

    need = {"world_size", "rank", "kind", "bytes", "n_params"}
    if not isinstance(measured, pd.DataFrame) or not need <= set(measured.columns):
        raise ValueError(f"measured must be a DataFrame with columns {sorted(need)}")
    per_rank = measured.pivot_table(
        index=["world_size", "rank"], columns="kind", values="bytes"
    )
    per_rank["total"] = per_rank[list(FSDP_KINDS)].sum(axis=1)
    busiest = per_rank.groupby("world_size").max()
    rows = []
    for n, row in busiest.iterrows():
        n_params = int(measured.loc[measured["world_size"] == n, "n_params"].iloc[0])
        formula = training_memory(
            n_params,
            dp=int(n),
            zero_stage=3,
            weight_bytes=4,
            grad_bytes=4,
            optimizer_bytes=8,
        )
        for kind in (*FSDP_KINDS, "total"):
            rows.append(
                {
                    "world_size": int(n),
                    "kind": kind,
                    "measured_bytes": float(row[kind]),
                    "formula_bytes": float(formula[kind]),
                }
            )
    out = pd.DataFrame(rows)
    out["ratio"] = out["measured_bytes"] / out["formula_bytes"]
    return out


if __name__ == "__main__":  # pragma: no cover - a demonstration from the shell
    table = fsdp_vs_formula(measure_fsdp_memory((1, 2)))
    print(table.to_string(index=False))


__all__ = [
    "FSDP_KINDS",
    "fsdp_memory_worker",
    "fsdp_vs_formula",
    "local_bytes",
    "measure_fsdp_memory",
]
