"""Memory on one GPU to fine-tune with LoRA: a frozen base and small adapters.

LoRA (Hu et al. 2021) freezes the base model and trains two low-rank factors
beside some of its matrices, so only the adapters carry gradients and optimizer
state; the activations of the backward pass through the frozen layers remain.
"""

from __future__ import annotations

from clusterlab.core.validate import check_float, check_int
from clusterlab.models.activations import activation_memory_per_layer


def lora_memory(
    n_params: float,
    *,
    n_layers: int,
    hidden: int,
    rank: int = 16,
    adapted_per_layer: int = 4,
    base_bytes: float = 2,
    seq_len: int | None = None,
    micro_batch: int = 1,
    n_heads: int | None = None,
    recompute: str = "none",
    **layer,
) -> dict:
    """Bytes on one GPU to fine-tune with LoRA (Hu et al. 2021).

    The base model is frozen: its weights stay in 16-bit (``base_bytes``) with
    no gradients and no optimizer state. Each adapted ``h x h`` matrix gets two
    trainable factors of ``rank * h`` parameters, trained with mixed-precision
    Adam (16 bytes each). Backward still runs through every frozen layer, so
    activations are as in
    :func:`~clusterlab.models.activations.activation_memory_per_layer`.

    Args:
        n_params: parameters of the base model, > 0.
        n_layers, hidden: model shape (integers >= 1).
        rank: LoRA rank r, >= 1.
        adapted_per_layer: matrices adapted per layer (4: q, k, v and o).
        base_bytes: bytes per frozen weight (2 for bf16, about 0.5 for 4-bit).
        seq_len, micro_batch, n_heads, recompute: as for activations; leave
            ``seq_len`` None to count model state only.
        **layer: more layer shape for the activations (``formula``,
            ``n_kv_heads``, ``ffn_hidden``, ``mlp``).

    Returns:
        dict like :func:`~clusterlab.models.memory.training_memory`'s, plus
        ``trainable_params``.
    """
    n = check_float("n_params", n_params, 0.0, low_inclusive=False)
    n_layers = check_int("n_layers", n_layers, 1)
    hidden = check_int("hidden", hidden, 1)
    rank = check_int("rank", rank, 1)
    adapted = check_int("adapted_per_layer", adapted_per_layer, 0)
    base = check_float("base_bytes", base_bytes, 0.0)
    trainable = float(n_layers * adapted * 2 * rank * hidden)
    out = {
        "weights": n * base + 2.0 * trainable,
        "grads": 2.0 * trainable,
        "optimizer": 12.0 * trainable,
        "activations": 0.0,
    }
    if seq_len is not None:
        per_layer = activation_memory_per_layer(
            hidden, seq_len, micro_batch, n_heads, recompute=recompute, **layer
        )
        out["activations"] = per_layer * n_layers
    out["total"] = sum(out.values())
    out["trainable_params"] = trainable
    return out


__all__ = ["lora_memory"]
