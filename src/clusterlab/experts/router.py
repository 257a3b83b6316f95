"""Training a router to spread its tokens: the auxiliary load-balancing loss.

Left alone, a router can send most tokens to a few experts: those experts set
the layer's time (the busiest expert is the straggler) and drop what exceeds
their capacity, while the rest idle. The Switch Transformer's auxiliary loss,

    aux = E * sum_i f_i * P_i,

where ``f_i`` is the fraction of token copies routed to expert ``i`` and
``P_i`` the router's mean probability for it, is 1 when routing is even and
grows as it concentrates; its gradient flows through ``P_i`` only.
:func:`train_router` trains a router on this loss alone for a few steps and
records how the imbalance falls.
"""

from __future__ import annotations

import pandas as pd
import torch

from clusterlab.core.validate import check_float, check_int
from clusterlab.experts.layer import load_imbalance, one_thread, route
from clusterlab.models.moe import expert_capacity


def load_balancing_loss(logits: torch.Tensor, expert_ids: torch.Tensor):
    """The Switch Transformer's auxiliary loss, ``E * sum_i f_i * P_i``.

    Args:
        logits: ``[T, E]`` router scores.
        expert_ids: ``[T, k]`` the experts chosen.

    Returns:
        A scalar tensor, 1 for perfectly even routing, up to ``E`` when every
        copy goes to one expert the router is sure of.
    """
    n_experts = logits.shape[-1]
    counts = torch.bincount(expert_ids.reshape(-1), minlength=n_experts)
    f = counts.to(logits.dtype) / expert_ids.numel()
    p = torch.softmax(logits, dim=-1).mean(0)
    return n_experts * (f * p).sum()


def train_router(
    n_tokens: int = 512,
    hidden: int = 16,
    n_experts: int = 8,
    top_k: int = 2,
    steps: int = 30,
    aux_weight: float = 1.0,
    lr: float = 0.1,
    capacity_factor: float = 1.25,
    seed: int = 0,
) -> pd.DataFrame:
    """Train a linear router on the load-balancing loss; record each step.

    The tokens share a common direction (as real hidden states do), so a
    random router starts with a few favourite experts.

    Args:
        n_tokens: tokens per step (the same batch every step), >= 1.
        hidden: token width, >= 1.
        n_experts: experts, >= 2; top_k: experts per token, in [1, n_experts].
        steps: optimisation steps, in [1, 1000].
        aux_weight: weight of the auxiliary loss, >= 0 (0: the router stays
            as it started, a control).
        lr: SGD learning rate, > 0 (much above 0.1 the router overshoots and
            piles its tokens on other experts instead).
        capacity_factor: for the count of dropped copies, > 0.
        seed: tokens and router weights.

    Returns:
        One row per step (before each update, and after the last): ``step``,
        ``aux_loss``, ``imbalance`` (busiest expert over the mean),
        ``dropped_fraction`` (copies over capacity) and ``aux_weight``.
    """
    t = check_int("n_tokens", n_tokens, 1)
    h = check_int("hidden", hidden, 1)
    e = check_int("n_experts", n_experts, 2)
    k = check_int("top_k", top_k, 1, e)
    steps = check_int("steps", steps, 1, 1000)
    w_aux = check_float("aux_weight", aux_weight, 0.0)
    lr = check_float("lr", lr, 0.0, low_inclusive=False)
    cap = expert_capacity(t, e, k, capacity_factor)
    gen = torch.Generator().manual_seed(seed)
    common = torch.randn(h, generator=gen)
    x = 2.0 * common / common.norm() * h**0.5 + torch.randn(t, h, generator=gen)
    # Plain SGD by hand: torch.optim would import the compiler stack (seconds).
    weight = (torch.randn(e, h, generator=gen) / h**0.5).requires_grad_()
    rows = []
    with one_thread():
        for step in range(steps + 1):
            logits = x @ weight.t()
            _, ids = route(logits, k)
            aux = load_balancing_loss(logits, ids)
            load = torch.bincount(ids.reshape(-1), minlength=e)
            dropped = float((load - cap).clamp(min=0).sum()) / ids.numel()
            rows.append(
                {
                    "step": step,
                    "aux_loss": float(aux.detach()),
                    "imbalance": load_imbalance(ids, e),
                    "dropped_fraction": dropped,
                    "aux_weight": w_aux,
                }
            )
            if step < steps:
                (w_aux * aux).backward()
                with torch.no_grad():
                    weight -= lr * weight.grad
                weight.grad = None
    return pd.DataFrame(rows)


__all__ = ["load_balancing_loss", "train_router"]
