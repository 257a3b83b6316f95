"""Reference solutions: bytes of model state per parameter and per GPU, with ZeRO."""

from __future__ import annotations


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


def state_bytes_per_gpu(
    dense_params: float,
    expert_params: float,
    *,
    tp: int,
    pp: int,
    dp: int,
    ep: int,
    zero_stage: int,
) -> float:
    """Bytes of model state one GPU keeps in a 5-D layout (mixed-precision Adam).

    The dense part is split by ``tp * pp`` and sharded by ZeRO over ``dp``; the
    routed experts are split by ``pp * ep`` and sharded over ``dp // ep``, the
    replicas that hold the same experts.
    """
    dense = dense_params / (tp * pp) * zero_bytes_per_param(zero_stage, dp)
    experts = expert_params / (pp * ep) * zero_bytes_per_param(zero_stage, dp // ep)
    return dense + experts


__all__ = ["state_bytes_per_gpu", "zero_bytes_per_param"]
