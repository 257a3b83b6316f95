"""Reference solution: bytes of model state per parameter under ZeRO."""

from __future__ import annotations

__all__ = ["zero_bytes_per_param"]


def zero_bytes_per_param(zero_stage: int, dp: int) -> float:
    """Bytes per parameter one GPU keeps, mixed-precision Adam, ZeRO stage.

    2 bytes of bf16 weights, 2 of bf16 gradients, 12 of fp32 optimizer state
    (master copy, first and second moments). Stage 1 splits the 12 over the
    ``dp`` replicas, stage 2 the gradients as well, stage 3 the weights too.
    """
    weights, grads, optimizer = 2.0, 2.0, 12.0
    if zero_stage >= 1:
        optimizer /= dp
    if zero_stage >= 2:
        grads /= dp
    if zero_stage >= 3:
        weights /= dp
    return weights + grads + optimizer
