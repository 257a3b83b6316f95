"""The serving lab's reference solution."""

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
