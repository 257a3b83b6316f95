"""Reference solutions: one all-reduce by hand, overlapped DDP, and ZeRO-1.

``average_gradients`` averages after the backward pass in one bucket.
``OverlappedDDP`` starts each all-reduce from a hook while the backward pass
still runs, one per parameter or one per bucket, as DDP does.
``ShardedOptimizer`` is ZeRO stage 1: each rank keeps the optimizer state of its
share of the parameters only, steps that share and broadcasts it.

The two classes take the interfaces that course assignments on the systems side
of training commonly ask for, so a reader can run them against such a suite:
``OverlappedDDP(module, bucket_size_mb=None)`` with
``finish_gradient_synchronization()``, and
``ShardedOptimizer(params, optimizer_cls, **kwargs)``.
"""

from __future__ import annotations

import functools

import torch
import torch.distributed as dist


def average_gradients(model: torch.nn.Module, world_size: int) -> None:
    """Make every rank's gradients the mean over ranks, in one all-reduce.

    The gradients are copied into one flat bucket, summed over the ranks in a
    single collective, divided by the number of ranks and copied back. One large
    message pays the start-up latency once, where one message per tensor pays it
    once per tensor: the reason DDP groups gradients into buckets.
    """
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    bucket = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(bucket, op=dist.ReduceOp.SUM)
    bucket /= world_size
    offset = 0
    for g in grads:
        g.copy_(bucket[offset : offset + g.numel()].view_as(g))
        offset += g.numel()


def fsdp_bytes_per_rank(n_params: float, world_size: int, zero_stage: int) -> float:
    """Bytes of model state per rank for fp32 weights and Adam, ZeRO stage s.

    Weights (4 bytes per parameter) are sharded from stage 3, gradients
    (4 bytes) from stage 2, Adam's two moments (8 bytes) from stage 1.
    """
    weights = 4 * n_params / (world_size if zero_stage >= 3 else 1)
    grads = 4 * n_params / (world_size if zero_stage >= 2 else 1)
    optimizer = 8 * n_params / (world_size if zero_stage >= 1 else 1)
    return weights + grads + optimizer


def _trainable(module: torch.nn.Module) -> list[torch.nn.Parameter]:
    """Each trainable parameter once: a tied one appears once, a frozen one not."""
    return [p for p in module.parameters() if p.requires_grad]


def gradient_buckets(params, bucket_size_mb: float) -> list[list[torch.nn.Parameter]]:
    """Group parameters into buckets of at most ``bucket_size_mb`` MiB, in order.

    A bucket is closed when the next parameter would make it larger than the
    cap; a parameter larger than the cap gets a bucket of its own.

    Args:
        params: parameters in the order their gradients are expected.
        bucket_size_mb: the cap in MiB (2**20 bytes, as DDP's ``bucket_cap_mb``).

    Returns:
        The buckets, each a non-empty list of parameters.
    """
    cap = bucket_size_mb * 2**20
    buckets, size = [], 0.0
    for p in params:
        nbytes = p.numel() * p.element_size()
        if not buckets or size + nbytes > cap:
            buckets.append([])
            size = 0.0
        buckets[-1].append(p)
        size += nbytes
    return buckets


class OverlappedDDP(torch.nn.Module):
    """Data parallelism whose all-reduces overlap the backward pass.

    At construction every rank takes rank 0's parameters and buffers. Each
    trainable parameter then gets one hook (``register_post_accumulate_grad_hook``)
    that runs as soon as its gradient is complete. With ``bucket_size_mb=None``
    the hook starts an asynchronous all-reduce of that gradient at once; with a
    cap, gradients are grouped in reverse parameter order (the order the
    backward pass produces them, as DDP groups them) and a bucket's flat
    all-reduce starts when its last gradient is ready. Call
    ``finish_gradient_synchronization()`` after ``backward()`` and before the
    optimizer's step: it waits for every all-reduce and leaves in each ``.grad``
    the mean over ranks. Every trainable parameter must get a gradient in every
    step (as DDP without ``find_unused_parameters``).

    Args:
        module: the model, the same architecture on every rank.
        bucket_size_mb: ``None`` for one all-reduce per parameter, or the cap of
            a bucket in MiB, in (0, 1e6].
    """

    def __init__(self, module: torch.nn.Module, bucket_size_mb: float | None = None):
        super().__init__()
        if bucket_size_mb is not None and not 0 < bucket_size_mb <= 1e6:
            raise ValueError(
                f"bucket_size_mb={bucket_size_mb!r} must be None or in (0, 1e6]"
            )
        self.module = module
        self.world_size = dist.get_world_size()
        with torch.no_grad():
            for tensor in [*module.parameters(), *module.buffers()]:
                dist.broadcast(tensor, src=0)
        params = _trainable(module)
        self._pending = []  # (handle, reduced tensor, bucket or None)
        if bucket_size_mb is None:
            self.buckets = None
            for p in params:
                p.register_post_accumulate_grad_hook(self._reduce_one)
            return
        self.buckets = gradient_buckets(params[::-1], bucket_size_mb)
        self._ready = [0] * len(self.buckets)
        for index, bucket in enumerate(self.buckets):
            for p in bucket:
                p.register_post_accumulate_grad_hook(
                    functools.partial(self._grad_ready, index)
                )

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _reduce_one(self, param: torch.Tensor) -> None:
        handle = dist.all_reduce(param.grad, async_op=True)
        self._pending.append((handle, param.grad, None))

    def _grad_ready(self, index: int, param: torch.Tensor) -> None:
        self._ready[index] += 1
        bucket = self.buckets[index]
        if self._ready[index] != len(bucket):  # its last gradient is not in yet
            return
        flat = torch.cat([p.grad.reshape(-1) for p in bucket])
        handle = dist.all_reduce(flat, async_op=True)
        self._pending.append((handle, flat, bucket))

    def finish_gradient_synchronization(self) -> None:
        """Wait for every all-reduce started in the backward pass; average."""
        for handle, tensor, bucket in self._pending:
            handle.wait()
            tensor.div_(self.world_size)
            offset = 0
            for p in bucket or ():
                p.grad.copy_(tensor[offset : offset + p.numel()].view_as(p.grad))
                offset += p.numel()
        self._pending.clear()
        if self.buckets is not None:
            self._ready = [0] * len(self.buckets)


class ShardedOptimizer(torch.optim.Optimizer):
    """ZeRO stage 1: each rank keeps the optimizer state of its parameters only.

    Parameters go to ranks in the order they are given, each to the rank that
    holds the fewest elements so far (the lowest rank on a tie), so the shards
    stay balanced by size. Each rank builds ``optimizer_cls`` over its own shard.
    ``step()`` steps that shard, then broadcasts every parameter from the rank
    that owns it, so all ranks end with the same parameters. The gradients must
    already be the same on every rank (averaged by DDP, say). Hyperparameters
    changed in ``param_groups`` (a learning-rate schedule) reach the shard at the
    next step. ``state_dict()`` holds no shard's state.

    Args:
        params: parameters or parameter groups, as for any optimizer.
        optimizer_cls: the optimizer each rank runs on its shard, such as
            ``torch.optim.AdamW``.
        **kwargs: its hyperparameters (``lr=1e-3``, ...), the groups' defaults.
    """

    def __init__(self, params, optimizer_cls, **kwargs):
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.optimizer_cls, self.local = optimizer_cls, None
        self._kwargs = kwargs
        self.owner: dict[torch.Tensor, int] = {}
        self._held = [0] * self.world_size  # elements owned by each rank
        self._local_group: list[int | None] = []  # index in self.local, per group
        super().__init__(params, kwargs)

    def add_param_group(self, param_group: dict) -> None:
        """Add a group; this rank's optimizer gets only the parameters it owns."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        mine = []
        for p in group["params"]:
            rank = min(range(self.world_size), key=lambda r: (self._held[r], r))
            self._held[rank] += p.numel()
            self.owner[p] = rank
            if rank == self.rank:
                mine.append(p)
        if not mine:
            self._local_group.append(None)
            return
        shard = {**group, "params": mine}
        if self.local is None:
            self.local = self.optimizer_cls([shard], **self._kwargs)
        else:
            self.local.add_param_group(shard)
        self._local_group.append(len(self.local.param_groups) - 1)

    @torch.no_grad()
    def step(self, closure=None):
        """Step this rank's shard, then take every parameter from its owner."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self.local is not None:
            for group, index in zip(self.param_groups, self._local_group, strict=True):
                if index is not None:
                    hyper = {k: v for k, v in group.items() if k != "params"}
                    self.local.param_groups[index].update(hyper)
            self.local.step()
        handles = [
            dist.broadcast(p, src=self.owner[p], async_op=True)
            for group in self.param_groups
            for p in group["params"]
        ]
        for handle in handles:
            handle.wait()
        return loss


__all__ = [
    "OverlappedDDP",
    "ShardedOptimizer",
    "average_gradients",
    "fsdp_bytes_per_rank",
    "gradient_buckets",
]
