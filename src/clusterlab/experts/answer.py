"""Reference solution: how many token copies a capacity limit drops."""

from __future__ import annotations

import torch


def dropped_copies(expert_ids: torch.Tensor, n_experts: int, capacity: int) -> int:
    """Token copies that find their expert full: ``sum_e max(0, load_e - capacity)``.

    Args:
        expert_ids: ``[T, k]`` the experts chosen for each token.
        n_experts: experts in all.
        capacity: most copies one expert takes.

    Returns:
        The number of copies dropped.
    """
    load = torch.bincount(expert_ids.reshape(-1), minlength=n_experts)
    return int((load - capacity).clamp(min=0).sum())


__all__ = ["dropped_copies"]
