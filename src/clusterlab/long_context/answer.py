"""Reference solution: the online-softmax merge of two blocks' attention."""

from __future__ import annotations

import torch


def merge_partial_attention(out_a, lse_a, out_b, lse_b):
    """Attention over the keys of two blocks, from each block's own result.

    Args:
        out_a, out_b: ``[..., n_q, d]``, each normalised over its own keys.
        lse_a, lse_b: ``[..., n_q]``, log-sum-exp of each block's scores
            (``-inf`` for a block with no keys yet).

    Returns:
        ``(out, lse)`` over both blocks' keys.
    """
    # The merged normaliser; logaddexp stays finite when one side is -inf.
    lse = torch.logaddexp(lse_a, lse_b)
    # Each block's share of the softmax mass rescales its normalised output.
    weight_a = torch.exp(lse_a - lse).unsqueeze(-1)
    weight_b = torch.exp(lse_b - lse).unsqueeze(-1)
    return weight_a * out_a + weight_b * out_b, lse


__all__ = ["merge_partial_attention"]
