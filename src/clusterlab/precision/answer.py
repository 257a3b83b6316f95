"""Reference solution: the per-tensor scale that fits a tensor into an FP8 format."""

from __future__ import annotations

import torch


def per_tensor_scale(t: torch.Tensor, fmt: torch.dtype) -> float:
    """The scale s with ``max |t / s|`` equal to the format's largest value.

    Args:
        t: a float tensor, not all zero.
        fmt: an FP8 dtype, ``torch.float8_e4m3fn`` (largest 448) or
            ``torch.float8_e5m2`` (largest 57,344).

    Returns:
        s, so that ``(t / s).to(fmt)`` uses the format's whole range and
        ``(t / s).to(fmt).float() * s`` is close to ``t``.
    """
    return t.abs().max().item() / torch.finfo(fmt).max


__all__ = ["per_tensor_scale"]
