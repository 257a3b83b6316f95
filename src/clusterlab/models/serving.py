"""Serving one model: what its KV cache holds, and how fast decoding can go.

Two closed forms, each checked against a measurement in the serving lab:

- the KV cache per token: ``2 x layers x KV heads x head dim x bytes`` (keys
  and values of every layer; grouped-query attention shrinks the KV heads), or,
  for multi-head latent attention, ``layers x latent width x bytes``;
- the decode roofline: one decoding step reads every weight once, whatever the
  batch, and each request's KV cache; it does ``2 x parameters`` FLOPs per
  token. So a step takes ``max(bytes read / bandwidth, FLOPs / peak)``, and
  tokens per second grow with the batch until the compute roof is reached, at
  the ridge batch ``peak x bytes per weight / (2 x bandwidth)``.
"""

from __future__ import annotations

import math

import pandas as pd

from clusterlab.core import published
from clusterlab.core.validate import check_float, check_int


def kv_bytes_per_token(
    n_layers: int,
    n_kv_heads: int | None = None,
    head_dim: int | None = None,
    *,
    kv_latent_dim: int | None = None,
    bytes_per_value: float = 2,
) -> float:
    """Bytes of KV cache one token adds to one sequence.

    Args:
        n_layers: transformer layers, in [1, 1000].
        n_kv_heads: key/value heads (grouped-query attention), in [1, 1024].
        head_dim: one head's width, in [1, 4096].
        kv_latent_dim: instead of heads, the width of a latent cache (DeepSeek's
            multi-head latent attention caches one vector per token and layer).
        bytes_per_value: 2 for bf16, 1 for fp8, 8 for float64, in (0, 16].

    Returns:
        bytes per token.
    """
    layers = check_int("n_layers", n_layers, 1, 1000)
    b = check_float("bytes_per_value", bytes_per_value, 0.0, 16.0, low_inclusive=False)
    if kv_latent_dim is not None:
        return layers * check_int("kv_latent_dim", kv_latent_dim, 1, 1 << 16) * b
    if n_kv_heads is None or head_dim is None:
        raise ValueError(
            "n_kv_heads and head_dim are needed unless kv_latent_dim is given "
            f"(got n_kv_heads={n_kv_heads!r}, head_dim={head_dim!r})"
        )
    heads = check_int("n_kv_heads", n_kv_heads, 1, 1024)
    return 2.0 * layers * heads * check_int("head_dim", head_dim, 1, 4096) * b


def kv_cache_table(
    gpu: str = "H200 SXM", n_gpus: int = 8, bytes_per_value: float = 2
) -> pd.DataFrame:
    """Each published model's KV bytes per token and the tokens a server holds.

    The weights (``params_total x bytes_per_value``) are spread over ``n_gpus``
    GPUs of ``gpu``; what is left of their memory holds KV cache.

    Args:
        gpu: a ``part`` of ``data/gpu_specs.csv``.
        n_gpus: GPUs holding one copy of the model, in [1, 1024].
        bytes_per_value: bytes per weight and per cached value, in (0, 16].

    Returns:
        DataFrame ``model, kv_bytes_per_token, mha_bytes_per_token,
        weights_bytes, free_bytes, tokens_held`` (``mha``: the same model
        with as many KV heads as attention heads; nan for a latent cache;
        ``tokens_held`` is 0 where the weights do not fit).
    """
    n = check_int("n_gpus", n_gpus, 1, 1024)
    hbm = float(published.value("gpu_specs", "hbm_bytes", part=gpu)) * n
    rows = []
    for _, m in published.load("serving_models").iterrows():
        latent = None if pd.isna(m["kv_latent_dim"]) else int(m["kv_latent_dim"])
        heads = None if pd.isna(m["n_kv_heads"]) else int(m["n_kv_heads"])
        dim = None if pd.isna(m["head_dim"]) else int(m["head_dim"])
        kv = kv_bytes_per_token(
            int(m["n_layers"]), heads, dim, kv_latent_dim=latent,
            bytes_per_value=bytes_per_value,
        )  # fmt: skip
        mha = (
            math.nan
            if latent is not None
            else kv_bytes_per_token(
                int(m["n_layers"]), int(m["n_heads"]), dim,
                bytes_per_value=bytes_per_value,
            )
        )  # fmt: skip
        weights = float(m["params_total"]) * bytes_per_value
        free = max(0.0, hbm - weights)
        rows.append((m["model"], kv, mha, weights, free, math.floor(free / kv)))
    cols = ["model", "kv_bytes_per_token", "mha_bytes_per_token", "weights_bytes"]
    return pd.DataFrame(rows, columns=cols + ["free_bytes", "tokens_held"])


def decode_step_s(
    batch: int,
    weight_bytes: float,
    flops_per_token: float,
    bandwidth_Bps: float,
    peak_flops: float,
    kv_bytes_per_request: float = 0.0,
) -> float:
    """The roofline's time for one decoding step of ``batch`` requests.

    Args:
        batch: requests decoded together, in [1, 1_000_000].
        weight_bytes: bytes of weights read once per step (> 0).
        flops_per_token: FLOPs per generated token, about 2 x parameters (> 0).
        bandwidth_Bps: memory bandwidth (> 0).
        peak_flops: the compute roof (> 0).
        kv_bytes_per_request: KV cache each request reads per step (>= 0).

    Returns:
        seconds: ``max(bytes / bandwidth, batch x flops_per_token / peak)``.
    """
    b = check_int("batch", batch, 1, 1_000_000)
    for name, v in (
        ("weight_bytes", weight_bytes),
        ("flops_per_token", flops_per_token),
        ("bandwidth_Bps", bandwidth_Bps),
        ("peak_flops", peak_flops),
    ):
        check_float(name, v, 0.0, math.inf, low_inclusive=False)
    kv = check_float("kv_bytes_per_request", kv_bytes_per_request, 0.0, math.inf)
    memory_s = (weight_bytes + b * kv) / bandwidth_Bps
    compute_s = b * flops_per_token / peak_flops
    return max(memory_s, compute_s)


def decode_tokens_per_s(batch: int, **roofline) -> float:
    """Tokens per second of the roofline at ``batch`` (see :func:`decode_step_s`)."""
    return batch / decode_step_s(batch, **roofline)


def ridge_batch(
    peak_flops: float, bandwidth_Bps: float, bytes_per_weight: float
) -> float:
    """The batch at which decoding turns from memory-bound to compute-bound.

    Each weight (``bytes_per_weight`` bytes) is read once per step and used for
    2 FLOPs per request, so the step's intensity is ``2 x batch /
    bytes_per_weight`` FLOP per byte; it meets the ridge ``peak / bandwidth``
    at ``batch = peak x bytes_per_weight / (2 x bandwidth)`` (KV reads ignored).
    """
    check_float("peak_flops", peak_flops, 0.0, math.inf, low_inclusive=False)
    check_float("bandwidth_Bps", bandwidth_Bps, 0.0, math.inf, low_inclusive=False)
    check_float("bytes_per_weight", bytes_per_weight, 0.0, 16.0, low_inclusive=False)
    return peak_flops * bytes_per_weight / (2.0 * bandwidth_Bps)


__all__ = [
    "decode_step_s",
    "decode_tokens_per_s",
    "kv_bytes_per_token",
    "kv_cache_table",
    "ridge_batch",
]
