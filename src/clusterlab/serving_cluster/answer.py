"""The serving-on-a-cluster lab's reference solution."""

from __future__ import annotations


def kv_bytes_shipped(
    n_layers: int,
    n_kv_heads: int,
    head_dim: int,
    prompt_tokens: int,
    bytes_per_value: int,
) -> int:
    """Bytes of KV cache a prefill process ships for one request.

    Keys and values (2) of every layer, for every KV head, for each prompt
    token: the first generated token's are computed by the decode side.
    """
    return 2 * n_layers * n_kv_heads * head_dim * prompt_tokens * bytes_per_value
