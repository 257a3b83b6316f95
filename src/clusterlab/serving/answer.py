"""The serving labs' reference solutions."""

from __future__ import annotations


def blocks_held(prompt_len: int, steps: int, block_size: int) -> int:
    """KV blocks a request holds after ``steps`` engine steps.

    The first step computes the prompt's keys and values and samples the first
    token; every later step caches the previous token and samples the next. The
    newest token is not in the cache yet, so ``prompt_len + steps - 1`` tokens
    are, in whole blocks.
    """
    cached = prompt_len + steps - 1
    return -(-cached // block_size)


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
