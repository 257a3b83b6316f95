"""Random routing, sampled: how loaded the busiest expert is, draw by draw.

Each of ``tokens`` tokens picks ``top_k`` different experts out of
``n_experts`` uniformly at random (the best a router can hope for without a
balancing loss); one *draw* is one batch. The busiest expert's load in each
draw is what the layer waits for, so its mean over draws is the quantity that
``cl.models.moe.busiest_expert_load`` predicts from order statistics.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from clusterlab.core.validate import check_int


def routing_loads(
    tokens: int, n_experts: int, top_k: int, n_draws: int = 200, seed=0
) -> np.ndarray:
    """Every expert's load in every draw of uniform random top-k routing.

    Args:
        tokens: tokens per batch, in [1, 10**6].
        n_experts: experts, in [2, 4096].
        top_k: experts per token (all different), in [1, n_experts].
        n_draws: batches drawn, in [1, 10**5].
        seed: an int or a ``numpy.random.Generator``.

    Returns:
        ``(n_draws, n_experts)`` integer loads; each row sums to
        ``tokens * top_k``.
    """
    t = check_int("tokens", tokens, 1, 10**6)
    e = check_int("n_experts", n_experts, 2, 4096)
    k = check_int("top_k", top_k, 1, e)
    d = check_int("n_draws", n_draws, 1, 10**5)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    loads = np.zeros((d, e), dtype=np.int64)
    if k == 1:
        for i in range(d):
            loads[i] = np.bincount(rng.integers(0, e, t), minlength=e)
        return loads
    for i in range(d):
        # k distinct experts per token: the k smallest of E uniform keys.
        keys = rng.random((t, e))
        picks = np.argpartition(keys, k - 1, axis=1)[:, :k]
        loads[i] = np.bincount(picks.ravel(), minlength=e)
    return loads


def busiest_expert_sweep(
    tokens: int, top_k: int, expert_counts=(2, 4, 8, 16, 32, 64), n_draws=100, seed=0,
    ep: int | None = None,
) -> pd.DataFrame:  # fmt: skip
    """Busiest expert over the mean load, sampled, for several numbers of experts.

    Args:
        tokens, top_k, expert_counts, n_draws, seed: the routings drawn.
        ep: None, or ranks that hold the experts in equal contiguous shares
            (each expert count must be a multiple of it): the table then also
            has the busiest rank, the sum of its experts' loads.

    Returns:
        One row per expert count: ``n_experts``, ``mean_load`` (copies),
        ``busiest_load`` (mean over draws of the largest load) and
        ``imbalance`` (their ratio); with ``ep``, also ``ep``,
        ``rank_mean_load``, ``busiest_rank_load`` and ``rank_imbalance``.
    """
    rng = np.random.default_rng(seed)
    rows = []
    for e in expert_counts:
        loads = routing_loads(tokens, e, top_k, n_draws, rng)
        mean = tokens * top_k / e
        busiest = float(loads.max(axis=1).mean())
        row = {"n_experts": int(e), "mean_load": mean, "busiest_load": busiest,
               "imbalance": busiest / mean}  # fmt: skip
        if ep is not None:
            w = check_int("ep", ep, 1, int(e))
            if e % w:
                raise ValueError(f"ep={w} must divide every expert count (got {e})")
            per_rank = loads.reshape(len(loads), w, e // w).sum(axis=2)
            rank_mean = tokens * top_k / w
            rank_busiest = float(per_rank.max(axis=1).mean())
            row.update(ep=w, rank_mean_load=rank_mean, busiest_rank_load=rank_busiest,
                       rank_imbalance=rank_busiest / rank_mean)  # fmt: skip
        rows.append(row)
    return pd.DataFrame(rows)


__all__ = ["busiest_expert_sweep", "routing_loads"]
