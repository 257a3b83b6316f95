"""Tensor parallelism by hand: a Megatron-style MLP split over the ranks of a group.

An MLP ``y = W2 · gelu(W1 · x + b1) + b2`` is split in two ways that need only
one all-reduce in each direction:

* the first layer is **column-parallel**: each rank keeps a slice of W1's output
  rows (and of b1), so it computes its own slice of the hidden activations with
  no communication, and the GELU runs on that slice alone;
* the second layer is **row-parallel**: each rank keeps the matching slice of W2's
  input columns, so its product is a *partial sum* of the output, and one
  all-reduce adds the partial sums (then b2 is added once).

Autograd sees two small functions at the edges of the block (Megatron-LM calls
them ``f`` and ``g``): ``copy_to_tp`` is the identity going forward and an
all-reduce of the input's gradient going backward; ``reduce_from_tp`` is an
all-reduce going forward and the identity going backward. Each logs the bytes it
hands to ``all_reduce``, so a lab can count the traffic of one layer.

Run it on four ranks from a shell and compare with one process::

    torchrun --nproc-per-node 4 -m clusterlab.tensor_parallel.ranks
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from clusterlab.core.validate import check_int


def _log(comm_log, phase: str, tensor: torch.Tensor) -> None:
    if comm_log is not None:
        nbytes = tensor.numel() * tensor.element_size()
        comm_log.append({"phase": phase, "op": "all_reduce", "bytes": nbytes})


class _CopyToTP(torch.autograd.Function):
    """f: identity forward; all-reduce of the gradient backward."""

    @staticmethod
    def forward(ctx, x, group, comm_log):
        ctx.group, ctx.comm_log = group, comm_log
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        # Every rank used the whole input, so its gradient is the sum of the
        # ranks' partial gradients.
        grad = grad.contiguous().clone()
        _log(ctx.comm_log, "backward", grad)
        dist.all_reduce(grad, group=ctx.group)
        return grad, None, None


class _ReduceFromTP(torch.autograd.Function):
    """g: all-reduce forward; identity backward."""

    @staticmethod
    def forward(ctx, x, group, comm_log):
        out = x.contiguous().clone()
        _log(comm_log, "forward", out)
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        # The sum's gradient reaches every partial sum unchanged.
        return grad, None, None


def copy_to_tp(x: torch.Tensor, group=None, comm_log: list | None = None):
    """Megatron's ``f``: pass ``x`` on; all-reduce its gradient in backward.

    Args:
        x: the block's input, the same on every rank of ``group``.
        group: the tensor-parallel process group (``None``: the whole world).
        comm_log: a list to append ``{"phase", "op", "bytes"}`` records to.

    Returns:
        ``x`` (a view), tied into autograd.
    """
    return _CopyToTP.apply(x, group, comm_log)


def reduce_from_tp(x: torch.Tensor, group=None, comm_log: list | None = None):
    """Megatron's ``g``: sum the ranks' partial results; pass the gradient on.

    Args:
        x: this rank's partial sum of the block's output.
        group: the tensor-parallel process group (``None``: the whole world).
        comm_log: a list to append ``{"phase", "op", "bytes"}`` records to.

    Returns:
        The sum over the group, the same on every rank.
    """
    return _ReduceFromTP.apply(x, group, comm_log)


def _shard_range(size: int, rank: int, world_size: int, what: str) -> slice:
    if size % world_size:
        raise ValueError(
            f"{what}={size} must be divisible by the world size {world_size}"
        )
    step = size // world_size
    return slice(rank * step, (rank + 1) * step)


class ColumnParallelLinear(nn.Module):
    """A linear layer whose output features are split over the ranks.

    Args:
        full: the single-process ``nn.Linear`` to take this rank's slice from.
        rank: this rank's index in the tensor-parallel group.
        world_size: the group's size; must divide ``full.out_features``.
    """

    def __init__(self, full: nn.Linear, rank: int, world_size: int):
        super().__init__()
        rows = _shard_range(full.out_features, rank, world_size, "out_features")
        self.weight = nn.Parameter(full.weight.detach()[rows].clone())
        self.bias = nn.Parameter(full.bias.detach()[rows].clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """This rank's slice of the output features (no communication)."""
        return nn.functional.linear(x, self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """A linear layer whose input features are split over the ranks.

    Args:
        full: the single-process ``nn.Linear`` to take this rank's slice from.
        rank: this rank's index in the tensor-parallel group.
        world_size: the group's size; must divide ``full.in_features``.
    """

    def __init__(self, full: nn.Linear, rank: int, world_size: int):
        super().__init__()
        cols = _shard_range(full.in_features, rank, world_size, "in_features")
        self.weight = nn.Parameter(full.weight.detach()[:, cols].clone())
        # The bias is not split: it is added once, after the sum.
        self.bias = nn.Parameter(full.bias.detach().clone())

    def forward(self, x_local, group=None, comm_log=None) -> torch.Tensor:
        """Partial product, one all-reduce (``g``), then the bias."""
        partial = nn.functional.linear(x_local, self.weight)
        return reduce_from_tp(partial, group, comm_log) + self.bias


class TensorParallelMLP(nn.Module):
    """Linear → GELU → Linear, split column-then-row over a tensor-parallel group.

    Args:
        full: the single-process MLP, ``nn.Sequential(Linear, GELU, Linear)``
            (``make_mlp`` builds one); each rank copies its slice of it.
        rank: this rank's index in ``group``.
        world_size: the group's size; must divide the hidden (FFN) width.
        group: the tensor-parallel process group (``None``: the whole world).
    """

    def __init__(self, full: nn.Sequential, rank: int, world_size: int, group=None):
        super().__init__()
        check_int("world_size", world_size, 1)
        check_int("rank", rank, 0, world_size - 1)
        self.fc1 = ColumnParallelLinear(full[0], rank, world_size)
        self.fc2 = RowParallelLinear(full[2], rank, world_size)
        self.group = group
        self.comm_log: list[dict] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The whole block's output, identical on every rank."""
        x = copy_to_tp(x, self.group, self.comm_log)
        hidden = nn.functional.gelu(self.fc1(x))  # this rank's slice only
        return self.fc2(hidden, self.group, self.comm_log)


def make_mlp(hidden: int, ffn: int, seed: int = 0) -> nn.Sequential:
    """The single-process reference MLP, Linear(h, ffn) → GELU → Linear(ffn, h).

    Args:
        hidden: model width h, >= 1.
        ffn: inner width (4h in most transformers), >= 1.
        seed: makes every rank build the same weights.
    """
    check_int("hidden", hidden, 1)
    check_int("ffn", ffn, 1)
    gen = torch.Generator().manual_seed(seed)
    mlp = nn.Sequential(nn.Linear(hidden, ffn), nn.GELU(), nn.Linear(ffn, hidden))
    with torch.no_grad():
        for p in mlp.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) / p.shape[-1] ** 0.5)
    return mlp


def tp_mlp_inputs(rank, world_size, batch, seq, hidden, ffn, seed):
    """This rank's input and slice of the reference MLP, the same on every rank.

    Returns:
        ``(x, tp)``: an input of shape (batch, seq, hidden) from ``seed + 1``
        that requires grad, and this rank's :class:`TensorParallelMLP` of the
        MLP built from ``seed``, both on this rank's device.
    """
    device = torch.device("cpu")
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", rank)
    full = make_mlp(hidden, ffn, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, seq, hidden, generator=gen).to(device).requires_grad_()
    return x, TensorParallelMLP(full, rank, world_size).to(device)


def tp_mlp_worker(rank, world_size, batch=2, seq=8, hidden=16, ffn=64, seed=0):
    """One rank of a tensor-parallel MLP: forward, backward, and what it sent.

    Every rank builds the same reference MLP and input from ``seed``, keeps its
    slice, runs forward and backward of ``loss = sum(y ** 2) / 2``, and returns
    its output, its gradients and its communication log.

    Returns:
        A dict: ``out`` (batch, seq, hidden), ``grad_x``, ``grad_fc1_w``,
        ``grad_fc1_b``, ``grad_fc2_w``, ``grad_fc2_b`` (this rank's slices) and
        ``comm`` (a list of ``{"phase", "op", "bytes"}`` records).
    """
    x, tp = tp_mlp_inputs(rank, world_size, batch, seq, hidden, ffn, seed)
    out = tp(x)
    (out.pow(2).sum() / 2).backward()
    return {
        "out": out.detach().cpu(),
        "grad_x": x.grad.cpu(),
        "grad_fc1_w": tp.fc1.weight.grad.cpu(),
        "grad_fc1_b": tp.fc1.bias.grad.cpu(),
        "grad_fc2_w": tp.fc2.weight.grad.cpu(),
        "grad_fc2_b": tp.fc2.bias.grad.cpu(),
        "comm": list(tp.comm_log),
    }


def _main() -> None:  # pragma: no cover - run under torchrun
    import os

    from clusterlab.core.backend import choose_backend

    world_size = int(os.environ["WORLD_SIZE"])
    rank = int(os.environ["RANK"])
    dist.init_process_group(choose_backend(world_size))
    try:
        res = tp_mlp_worker(rank, world_size)
        full = make_mlp(16, 64, 0)
        x = torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(1))
        same = torch.allclose(res["out"], full(x).detach(), atol=1e-5)
        sent = sum(r["bytes"] for r in res["comm"])
        print(f"rank {rank}: output equals one process: {same}; sent {sent} bytes")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":  # pragma: no cover
    _main()


__all__ = [
    "ColumnParallelLinear",
    "RowParallelLinear",
    "TensorParallelMLP",
    "copy_to_tp",
    "make_mlp",
    "reduce_from_tp",
    "tp_mlp_inputs",
    "tp_mlp_worker",
]
