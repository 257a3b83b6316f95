"""Data parallelism by hand and with ``DistributedDataParallel``, on one code path.

Every rank holds a full copy of a small MLP, computes gradients on its own slice
of the global batch, and averages the gradients with an all-reduce before the
optimizer step, so the copies stay identical. ``allreduce_gradients`` does that
average one tensor at a time; DDP does the same arithmetic in buckets, started
while the backward pass is still running. ``dp_train_worker`` trains both from
the same start on the same data, so a lab can check they end with the same
weights and time where each step goes (compute versus communication).

Run it from a shell (gloo on CPUs, NCCL when every rank has a GPU)::

    python -m clusterlab.data_parallel.ranks
"""

from __future__ import annotations

import time

import torch
import torch._dynamo
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from clusterlab.core.validate import check_float, check_int

# DDP's constructor imports torch._dynamo (about 1 s of CPU). Importing it here, in
# the notebook's process, means forked ranks inherit it instead of each paying it.

#: How gradients are averaged: per tensor by hand, or by DDP's buckets.
DP_MODES = ("hand", "ddp")


def one_thread_per_rank() -> None:
    """Compute on one CPU thread in this rank.

    Two reasons. Ranks of every world size then compute alike (one core each),
    so step times compare across world sizes. And a rank forked from a notebook
    that has already run a multi-threaded (OpenMP) torch operation can hang in
    its first multi-threaded operation; with one thread it never starts one.
    """
    torch.set_num_threads(1)


def rank_device(rank: int) -> torch.device:
    """The device a rank computes on: its own GPU under NCCL, else the CPU."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", rank)
    return torch.device("cpu")


def dp_mlp(width: int = 256, depth: int = 2, seed: int = 0) -> torch.nn.Sequential:
    """A small MLP, ``depth`` hidden layers of ``width``, with seeded weights.

    Args:
        width: features in and out of every layer, in [1, 16384].
        depth: hidden Linear + ReLU layers before the output layer, in [0, 64].
        seed: seeds the weights, so every rank builds the same model.

    Returns:
        A ``torch.nn.Sequential`` with ``(depth + 1)·(width² + width)`` parameters.
    """
    width = check_int("width", width, 1, 16384)
    depth = check_int("depth", depth, 0, 64)
    gen_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(width, width))
    torch.random.set_rng_state(gen_state)  # leave the caller's random stream alone
    return torch.nn.Sequential(*layers)


def dp_batch(
    step: int, rank: int, world_size: int, batch_per_rank: int, width: int, seed: int
):
    """This rank's slice ``(x, y)`` of global batch number ``step``.

    The global batch (``world_size · batch_per_rank`` rows) is drawn from
    ``seed + step`` alone, so the slices of all ranks together are exactly the
    batch that one process would train on.
    """
    gen = torch.Generator().manual_seed(seed * 100_003 + step)
    rows = world_size * batch_per_rank
    x = torch.randn(rows, width, generator=gen)
    y = torch.randn(rows, width, generator=gen)
    part = slice(rank * batch_per_rank, (rank + 1) * batch_per_rank)
    return x[part], y[part]


def allreduce_gradients(model: torch.nn.Module, group=None) -> None:
    """Average every parameter's gradient over the ranks, one all-reduce per tensor.

    After it, each rank's ``.grad`` is the mean of all ranks' gradients, which is
    the gradient of the mean loss over the whole global batch.
    """
    world_size = dist.get_world_size(group)
    for param in model.parameters():
        if param.grad is not None:
            dist.all_reduce(param.grad, op=dist.ReduceOp.SUM, group=group)
            param.grad /= world_size


def flat_params(model: torch.nn.Module) -> torch.Tensor:
    """All parameters as one flat float64 vector on the CPU, to compare models."""
    module = getattr(model, "module", model)  # unwrap DDP
    return torch.cat(
        [p.detach().reshape(-1).double().cpu() for p in module.parameters()]
    )


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # GPU work is asynchronous: wait before timing


def _train(mode, rank, world_size, device, steps, width, depth, batch, seed, lr):
    model = dp_mlp(width, depth, seed).to(device)
    if mode == "ddp":
        ids = [device.index] if device.type == "cuda" else None
        model = DistributedDataParallel(model, device_ids=ids)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    compute_s, wait_s, comm_s, step_s = [], [], [], []
    for step in range(steps):
        x, y = (
            t.to(device) for t in dp_batch(step, rank, world_size, batch, width, seed)
        )
        _sync(device)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()  # under DDP this also all-reduces, bucket by bucket
        _sync(device)
        t_ready = time.perf_counter()
        if mode != "ddp" and world_size > 1:
            # Wait for the slowest rank's backward first, so that the all-reduce
            # timer holds communication alone, not one rank waiting for another.
            dist.barrier()
        t1 = time.perf_counter()
        if mode != "ddp":
            allreduce_gradients(model)
            _sync(device)
        t2 = time.perf_counter()
        opt.step()
        _sync(device)
        t3 = time.perf_counter()
        compute_s.append(t_ready - t0 + t3 - t2)
        wait_s.append(t1 - t_ready)
        comm_s.append(t2 - t1)
        step_s.append(t3 - t0)
    return {
        "params": flat_params(model),
        "compute_s": compute_s,
        "wait_s": wait_s,
        "comm_s": comm_s,
        "step_s": step_s,
    }


def dp_train_worker(
    rank: int,
    world_size: int,
    *,
    modes=DP_MODES,
    steps: int = 5,
    width: int = 256,
    depth: int = 2,
    batch_per_rank: int = 16,
    seed: int = 0,
    lr: float = 0.05,
) -> dict:
    """Train the same MLP once per mode, from the same weights on the same data.

    Run it with ``cl.launch(dp_train_worker, n, ...)``.

    Args:
        rank, world_size: given by the launcher.
        modes: any of ``"hand"`` (``allreduce_gradients`` after the backward pass)
            and ``"ddp"`` (``DistributedDataParallel``).
        steps: optimizer steps per mode, in [1, 10000].
        width, depth: the MLP's shape (see ``dp_mlp``).
        batch_per_rank: rows of the global batch each rank computes, in [1, 65536].
        seed: seeds the weights and the data.
        lr: SGD learning rate, in (0, 10].

    Returns:
        ``{mode: {"params", "compute_s", "wait_s", "comm_s", "step_s"}}``: the
        final weights (flat float64) and per-step seconds. ``wait_s`` is the
        hand-written version's wait at a barrier for the slowest rank's backward
        pass, kept out of ``comm_s`` so that ``comm_s`` times the all-reduces
        alone (``step_s`` holds it). For DDP, ``comm_s`` and ``wait_s`` are 0:
        its all-reduces run inside the backward pass and count as compute there.
    """
    steps = check_int("steps", steps, 1, 10000)
    batch_per_rank = check_int("batch_per_rank", batch_per_rank, 1, 65536)
    lr = check_float("lr", lr, 0.0, 10.0, low_inclusive=False)
    for mode in modes:
        if mode not in DP_MODES:
            raise ValueError(f"modes={modes!r} holds {mode!r}: allowed {DP_MODES}")
    one_thread_per_rank()
    device = rank_device(rank)
    args = (rank, world_size, device, steps, width, depth, batch_per_rank, seed, lr)
    return {mode: _train(mode, *args) for mode in modes}


if __name__ == "__main__":  # pragma: no cover - a demonstration from the shell
    from clusterlab.core.launcher import launch

    for n in (1, 2):
        out = launch(dp_train_worker, n, steps=5)
        gap = (out[0]["hand"]["params"] - out[0]["ddp"]["params"]).abs().max().item()
        print(f"{n} rank(s): hand vs DDP, largest weight difference {gap:.2e}")


__all__ = [
    "DP_MODES",
    "allreduce_gradients",
    "dp_batch",
    "dp_mlp",
    "dp_train_worker",
    "flat_params",
    "one_thread_per_rank",
    "rank_device",
]
