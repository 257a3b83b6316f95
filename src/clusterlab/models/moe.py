"""Mixture of experts: what expert parallelism sends, and what routing costs.

A mixture-of-experts (MoE) layer replaces one feed-forward block with
``n_experts`` of them and a router that sends each token to ``top_k``. With
expert parallelism over ``ep`` ranks, each rank holds ``n_experts / ep``
experts, so every token copy whose expert lives elsewhere crosses the network
twice: once in the *dispatch* all-to-all and once, as the expert's output, in
the *combine* all-to-all. This module gives

* the bytes one rank sends in one all-to-all and its alpha-beta time,
* that time with the ranks inside one NVLink domain against across the
  scale-out network (link rates from ``data/`` through ``cl.models.links``),
* an expert's capacity under a capacity factor, and
* the load of the busiest expert under random routing: a maximum over experts,
  the same order statistic as the slowest worker of a data-parallel step
  (``cl.models.stragglers``), because the busiest expert sets the step.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from clusterlab.core.validate import check_float, check_int
from clusterlab.models.links import as_link
from clusterlab.models.stragglers import expected_step_time


def alltoall_bytes_per_rank(
    tokens_per_rank: int, hidden: int, top_k: int, ep: int, bytes_per_value: float
) -> float:
    """Bytes one rank sends in one dispatch all-to-all, under uniform routing.

    Every token goes to ``top_k`` experts, each copy sent on its own (no
    de-duplication of copies bound for the same rank); a fraction
    ``(ep - 1) / ep`` of the experts lives on other ranks. The combine
    all-to-all sends the same bytes back.

    Args:
        tokens_per_rank: tokens this rank routes, >= 0.
        hidden: values per token (the model's hidden size), >= 1.
        top_k: experts per token, >= 1.
        ep: ranks the experts are spread over (expert-parallel size), >= 1.
        bytes_per_value: bytes of one value (2 for bf16), > 0.

    Returns:
        ``tokens_per_rank * top_k * hidden * bytes_per_value * (ep - 1) / ep``
        bytes.
    """
    t = check_int("tokens_per_rank", tokens_per_rank, 0)
    h = check_int("hidden", hidden, 1)
    k = check_int("top_k", top_k, 1)
    ep = check_int("ep", ep, 1)
    b = check_float("bytes_per_value", bytes_per_value, 0.0, low_inclusive=False)
    return t * k * h * b * (ep - 1) / ep


def alltoall_time_s(
    bytes_per_rank: float, ep: int, bandwidth_Bps: float, latency_s: float
) -> float:
    """Alpha-beta time of one all-to-all over ``ep`` ranks.

    Each rank sends a message to each of the other ``ep - 1`` ranks, one after
    another (a latency ``alpha`` each), while its ``bytes_per_rank`` leave
    through its own link at ``bandwidth_Bps`` (``beta``):
    ``(ep - 1) * latency_s + bytes_per_rank / bandwidth_Bps``.

    Args:
        bytes_per_rank: bytes one rank sends in total, >= 0.
        ep: ranks in the all-to-all, >= 1 (one rank sends nothing: 0 s).
        bandwidth_Bps: bytes/s one rank's link carries per direction, > 0.
        latency_s: seconds of fixed cost per message (alpha), >= 0.

    Returns:
        Seconds.
    """
    nbytes = check_float("bytes_per_rank", bytes_per_rank, 0.0)
    ep = check_int("ep", ep, 1)
    bw = check_float("bandwidth_Bps", bandwidth_Bps, 0.0, low_inclusive=False)
    alpha = check_float("latency_s", latency_s, 0.0)
    return (ep - 1) * alpha + nbytes / bw


def ep_layer_alltoall_s(
    tokens_per_rank: int,
    hidden: int,
    top_k: int,
    ep: int,
    bytes_per_value: float,
    *,
    ranks_per_domain: int = 8,
    nvlink="NVLink 4",
    network="NDR400 InfiniBand",
    max_nodes_per_token: int | None = None,
) -> dict:
    """Dispatch plus combine time of one MoE layer, by where the ranks are.

    Ranks in groups of ``ranks_per_domain`` share an NVLink domain (a node);
    a rank reaches the rest through its own network port. The share of a
    rank's bytes bound for its own domain goes over NVLink, the rest over the
    network; the two run at once, so the slower one sets the time.

    With ``max_nodes_per_token`` (DeepSeek-V3's node-limited routing: each
    token's experts lie on at most M nodes) a token crosses the network once
    per remote node it goes to, to the GPU of the same local index there,
    which forwards it over NVLink to the experts' GPUs (the report's IB-then-
    NVLink dispatch): ``min(M, top_k, nodes) * (nodes - 1) / nodes`` copies
    per token over the network, instead of one per remote expert, and the
    ``top_k`` copies' fan-out inside the nodes over NVLink.

    Args:
        tokens_per_rank, hidden, top_k, ep, bytes_per_value: as in
            :func:`alltoall_bytes_per_rank`.
        ranks_per_domain: GPUs joined by NVLink (a node), >= 1.
        nvlink, network: ``cl.models.links`` names or ``Link`` objects; their
            effective bytes/s and alpha come from ``data/``.

        max_nodes_per_token: M of node-limited routing, >= 1, or None (each
            copy to its expert's rank directly).

    Returns:
        A dict: ``bytes_per_rank`` (one all-to-all), ``nvlink_bytes``,
        ``network_bytes``, ``nvlink_s``, ``network_s`` and ``layer_s`` (the
        two all-to-alls of the layer, dispatch and combine).
    """
    total = alltoall_bytes_per_rank(tokens_per_rank, hidden, top_k, ep, bytes_per_value)
    g = check_int("ranks_per_domain", ranks_per_domain, 1)
    fast, slow = as_link(nvlink), as_link(network)
    inside = min(g, ep) - 1  # peers in this rank's domain
    outside = ep - 1 - inside
    share_in = inside / (ep - 1) if ep > 1 else 0.0
    nv_bytes, net_bytes = total * share_in, total * (1 - share_in)
    if max_nodes_per_token is not None and outside:
        m = check_int("max_nodes_per_token", max_nodes_per_token, 1)
        nodes = -(-ep // g)
        one = tokens_per_rank * hidden * bytes_per_value  # one copy of each token
        net_bytes = one * min(m, top_k, nodes) * (nodes - 1) / nodes
        nv_bytes = one * top_k * (min(g, ep) - 1) / min(g, ep)  # the fan-out
    nv_s = alltoall_time_s(nv_bytes, inside + 1, fast.effective_Bps, fast.alpha_s)
    net_s = (
        alltoall_time_s(net_bytes, outside + 1, slow.effective_Bps, slow.alpha_s)
        if outside
        else 0.0
    )
    return {
        "bytes_per_rank": total,
        "nvlink_bytes": nv_bytes,
        "network_bytes": net_bytes,
        "nvlink_s": nv_s,
        "network_s": net_s,
        "layer_s": 2 * max(nv_s, net_s),
    }


def ep_alltoall_sweep(
    tokens_per_rank: int,
    hidden: int,
    top_k: int,
    bytes_per_value: float,
    ep_values=(2, 4, 8, 16, 32, 64),
    *,
    ranks_per_domain: int = 8,
    nvlink="NVLink 4",
    network="NDR400 InfiniBand",
) -> pd.DataFrame:
    """One MoE layer's all-to-all time against the expert-parallel size.

    Returns:
        One row per ``ep``: ``ep``, ``bytes_per_rank``, ``layer_s``, ``placement``
        ("inside NVLink" while ``ep <= ranks_per_domain``, else "across the
        network"), ``ranks_per_domain`` and ``network_share`` (fraction of
        bytes on the network).
    """
    rows = []
    for ep in ep_values:
        r = ep_layer_alltoall_s(
            tokens_per_rank,
            hidden,
            top_k,
            ep,
            bytes_per_value,
            ranks_per_domain=ranks_per_domain,
            nvlink=nvlink,
            network=network,
        )
        inside = ep <= ranks_per_domain
        rows.append(
            {
                "ep": int(ep),
                "bytes_per_rank": r["bytes_per_rank"],
                "layer_s": r["layer_s"],
                "placement": "inside NVLink" if inside else "across the network",
                "ranks_per_domain": int(ranks_per_domain),
                "network_share": r["network_bytes"] / r["bytes_per_rank"]
                if r["bytes_per_rank"]
                else 0.0,
            }
        )
    return pd.DataFrame(rows)


def expert_capacity(
    tokens: int, n_experts: int, top_k: int, capacity_factor: float
) -> int:
    """Most token copies one expert takes: ``ceil(cf * tokens * top_k / E)``.

    Copies routed to a full expert are dropped (they skip the layer through
    the residual connection), as in GShard and the Switch Transformer.

    Args:
        tokens: tokens routed, >= 0.
        n_experts: experts, >= 1.
        top_k: experts per token, in [1, n_experts].
        capacity_factor: slack over a perfectly even share, > 0.

    Returns:
        The capacity in token copies.
    """
    t = check_int("tokens", tokens, 0)
    e = check_int("n_experts", n_experts, 1)
    k = check_int("top_k", top_k, 1, e)
    cf = check_float("capacity_factor", capacity_factor, 0.0, low_inclusive=False)
    # Round first so that 1.25 * 64 is 80, not 80.00000000000001 -> 81.
    return math.ceil(round(cf * t * k / e, 9))


def busiest_expert_load(tokens: int, n_experts: int, top_k: int) -> dict:
    """Expected load of the busiest expert when routing is uniform and random.

    Each expert's load is close to normal, mean ``mu = tokens * top_k / E`` and
    variance ``mu * (1 - top_k/E)`` (binomial: each token picks an expert
    at most once), so the busiest of ``E`` experts is
    the slowest of ``E`` workers with that mean and coefficient of variation:
    ``cl.models.stragglers.expected_step_time`` gives its mean.

    Args:
        tokens: tokens routed, >= 1 (with ``tokens * top_k / E`` >= 1).
        n_experts: experts, in [2, 65536].
        top_k: experts per token, in [1, n_experts].

    Returns:
        A dict: ``mean_load`` (token copies), ``cv``, ``max_load`` (expected
        load of the busiest expert) and ``imbalance`` (``max_load / mean_load``,
        the factor by which the busiest expert slows the layer).
    """
    t = check_int("tokens", tokens, 1)
    e = check_int("n_experts", n_experts, 2, 65536)
    k = check_int("top_k", top_k, 1, e)
    mu = t * k / e
    if mu < 1:
        raise ValueError(
            f"tokens={t!r} is too few: tokens * top_k / n_experts must be >= 1"
        )
    cv = min(1.0, float(np.sqrt((1 - k / e) / mu)))
    mx = expected_step_time(e, mu, "normal", cv)
    return {"mean_load": mu, "cv": cv, "max_load": mx, "imbalance": mx / mu}


def busiest_rank_load(tokens: int, n_experts: int, top_k: int, ep: int) -> dict:
    """Expected load of the busiest *rank*, each of ``ep`` holding ``E / ep`` experts.

    A rank computes all of its experts' copies, so an expert-parallel layer
    waits for the busiest rank, the sum of its ``E / ep`` experts' loads; the
    copies a capacity factor drops are set by the busiest expert instead
    (:func:`busiest_expert_load`). A token's ``top_k`` distinct experts land
    on a rank's experts as a draw without replacement (hypergeometric): mean
    ``top_k / ep``, variance ``top_k (1/ep)(1 - 1/ep)(E - top_k)/(E - 1)``;
    summed over the tokens, the rank's load is close to normal, and the
    busiest of ``ep`` ranks is the slowest of ``ep`` such workers. Summing
    experts averages their noise out, so the busiest rank is nearer its mean
    than the busiest expert is to its own.

    Args:
        tokens: tokens routed, >= 1.
        n_experts: experts, in [2, 65536].
        top_k: experts per token, in [1, n_experts].
        ep: ranks, in [1, n_experts], dividing ``n_experts``.

    Returns:
        A dict: ``mean_load`` (copies per rank), ``cv``, ``max_load`` and
        ``imbalance`` (``max_load / mean_load``: the layer's slowdown).
    """
    t = check_int("tokens", tokens, 1)
    e = check_int("n_experts", n_experts, 2, 65536)
    k = check_int("top_k", top_k, 1, e)
    w = check_int("ep", ep, 1, e)
    if e % w:
        raise ValueError(f"ep={w} must divide n_experts={e}")
    mu = t * k / w
    if w == 1:
        return {"mean_load": mu, "cv": 0.0, "max_load": mu, "imbalance": 1.0}
    var = t * k * (1 / w) * (1 - 1 / w) * (e - k) / (e - 1)
    cv = min(1.0, float(np.sqrt(var) / mu))
    mx = expected_step_time(w, mu, "normal", cv)
    return {"mean_load": mu, "cv": cv, "max_load": mx, "imbalance": mx / mu}


def config_alltoall_sweep(
    models=("Mixtral 8x7B", "DeepSeek-V3"),
    tokens_per_rank=(1024, 4096, 16384),
    ep_values=(2, 4, 8, 16, 32, 64),
    bytes_per_value: float = 2,
    **placement,
) -> pd.DataFrame:
    """:func:`ep_alltoall_sweep` for published MoE models (``data/moe_configs.csv``).

    Each model's width and ``top_k`` come from its row; only the ``ep`` values
    that divide its number of experts are kept. ``placement`` goes to
    :func:`ep_layer_alltoall_s` (``ranks_per_domain``, ``nvlink``, ``network``).

    Returns:
        :func:`ep_alltoall_sweep`'s columns plus ``model``, ``tokens_per_rank``
        and ``layer_ms``.
    """
    from clusterlab.core import published

    parts = []
    for name in models:
        cfg = published.row("moe_configs", model=name)
        eps = [ep for ep in ep_values if int(cfg["n_experts"]) % ep == 0]
        for t in tokens_per_rank:
            df = ep_alltoall_sweep(
                t, int(cfg["hidden"]), int(cfg["top_k"]), bytes_per_value, eps,
                **placement,
            )  # fmt: skip
            parts.append(df.assign(model=name, tokens_per_rank=int(t)))
    out = pd.concat(parts, ignore_index=True)
    return out.assign(layer_ms=out["layer_s"] * 1e3)


__all__ = [
    "alltoall_bytes_per_rank",
    "alltoall_time_s",
    "busiest_expert_load",
    "busiest_rank_load",
    "config_alltoall_sweep",
    "ep_alltoall_sweep",
    "ep_layer_alltoall_s",
    "expert_capacity",
]
