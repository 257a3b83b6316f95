"""Reference solution: the forward pass of a row-parallel linear layer."""

from __future__ import annotations

import torch
import torch.distributed as dist


def row_parallel_forward(
    x_local: torch.Tensor, weight_local: torch.Tensor, bias: torch.Tensor
) -> torch.Tensor:
    """``y = x · Wᵀ + b`` when each rank holds a slice of W's columns.

    Args:
        x_local: this rank's slice of the input features, shape (..., in / n).
        weight_local: the matching columns of W, shape (out, in / n).
        bias: the whole bias, shape (out,), the same on every rank.

    Returns:
        The whole output, shape (..., out), the same on every rank.
    """
    # Each rank's product covers only its slice of the input features, so it is
    # a partial sum of y; one all-reduce adds the partial sums.
    partial = x_local @ weight_local.T
    dist.all_reduce(partial)
    # The bias goes in after the sum: added before, it would be counted n times.
    return partial + bias


__all__ = ["row_parallel_forward"]
