"""Memory per GPU for training a transformer: model state plus activations.

Model state follows ZeRO (Rajbhandari et al. 2020): mixed-precision Adam keeps
2 bytes of bf16 weights, 2 bytes of bf16 gradients and 12 bytes of fp32
optimizer state (master weights, first and second moments) per parameter,
16 bytes in all. Tensor parallelism (``tp``) and pipeline parallelism (``pp``)
each hold a slice of the model, so a GPU keeps ``n_params / (tp * pp)``
parameters; ZeRO then shards that slice over the ``dp`` data-parallel replicas:
stage 1 shards the optimizer state, stage 2 the gradients too, stage 3 (FSDP)
the weights too.

Activations follow Korthikanti et al. 2022 (arXiv:2205.05198), Table 2: one
transformer layer stores ``s*b*h*(34 + 5*a*s/h)`` bytes of 16-bit activations
for sequence length ``s``, micro-batch ``b``, hidden size ``h`` and ``a``
attention heads. The formula assumes a GPT-style layer (multi-head attention,
MLP of width 4h); for Llama's grouped-query attention and SwiGLU MLP it is an
estimate, good to tens of percent, not an exact count.

Pipeline convention. Under 1F1B the first stage is the worst case: before its
first backward pass it has run ``pp`` forward passes, so it holds the
activations of ``min(pp, m)`` micro-batches for its ``ceil(n_layers / pp)``
layers (Korthikanti et al. 2022, section 4.2.3). GPipe holds all ``m``. With
``microbatches=None`` we take ``m >= pp``, so 1F1B keeps ``pp`` in flight and
the total is about one micro-batch's activations for the whole model.

Not counted: the embedding and output-layer activations (for Llama 2 70B the
fp32 logits of one 4096-token sequence are about 0.5 GB on the last stage),
temporary buffers (an FSDP all-gather of one layer, communication buckets),
the CUDA context and allocator fragmentation. Leave 10–20% of the GPU free.

Fp32 FSDP with ``torch.optim.Adam`` (as in the FSDP lab) keeps fp32 weights (4 B),
fp32 gradients (4 B) and ``exp_avg`` + ``exp_avg_sq`` (8 B), all sharded:
``training_memory(n, dp=world, zero_stage=3, weight_bytes=4, grad_bytes=4,
optimizer_bytes=8)`` gives ``16 * n / world`` bytes per rank.
"""

from __future__ import annotations

import math

from .._validate import check_choice, check_float, check_int

__all__ = [
    "training_memory",
    "activation_memory_per_layer",
    "model_state_bytes_per_param",
    "lora_memory",
    "RECOMPUTE_MODES",
]

RECOMPUTE_MODES = ("none", "selective", "full")
SCHEDULES = ("1f1b", "gpipe")


def model_state_bytes_per_param(
    zero_stage: int = 0,
    dp: int = 1,
    *,
    weight_bytes: float = 2,
    grad_bytes: float = 2,
    optimizer_bytes: float = 12,
) -> float:
    """Bytes of model state one GPU keeps per parameter of its model slice.

    Args:
        zero_stage: 0 (replicated), 1 (optimizer sharded), 2 (+ gradients),
            3 (+ weights, i.e. FSDP full sharding).
        dp: data-parallel replicas that share the sharded state, >= 1.
        weight_bytes, grad_bytes, optimizer_bytes: bytes per parameter of each
            kind of state (defaults: mixed-precision Adam, 2 + 2 + 12).

    Returns:
        Bytes per parameter, e.g. 16 for stage 0 and ``2 + 2 + 12/dp`` for stage 1.
    """
    zero_stage = check_int("zero_stage", zero_stage, 0, 3)
    dp = check_int("dp", dp, 1)
    w = check_float("weight_bytes", weight_bytes, 0.0)
    g = check_float("grad_bytes", grad_bytes, 0.0)
    o = check_float("optimizer_bytes", optimizer_bytes, 0.0)
    return (
        w / (dp if zero_stage >= 3 else 1)
        + g / (dp if zero_stage >= 2 else 1)
        + o / (dp if zero_stage >= 1 else 1)
    )


def activation_memory_per_layer(
    hidden: int,
    seq_len: int,
    micro_batch: int = 1,
    n_heads: int | None = None,
    *,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
) -> float:
    """Bytes of 16-bit activations one transformer layer keeps for backward.

    Korthikanti et al. 2022, Table 2 (``sbh = seq_len * micro_batch * hidden``):

    - no recomputation: ``sbh * (34 + 5*a*s/h)``; with tensor parallelism ``t``
      only the 24 ``sbh`` inside the attention and MLP blocks and the ``5as/h``
      attention-score term split: ``sbh * (10 + 24/t + 5*a*s/(h*t))``; with
      sequence parallelism the other 10 split too: ``sbh/t * (34 + 5*a*s/h)``.
    - selective recomputation (recompute the attention scores): drop ``5as/h``.
    - full recomputation: keep only the layer input, ``2 * sbh`` (``/ t`` with
      sequence parallelism, whose layer input is split along the sequence).

    Args:
        hidden: hidden size h, >= 1.
        seq_len: sequence length s in tokens, >= 1.
        micro_batch: sequences per micro-batch b, >= 1.
        n_heads: attention heads a (needed only when ``recompute="none"``).
        tp: tensor-parallel degree t, >= 1.
        sequence_parallel: whether sequence parallelism splits the rest.
        recompute: "none", "selective" or "full".

    Returns:
        Bytes per layer per GPU.
    """
    h = check_int("hidden", hidden, 1)
    s = check_int("seq_len", seq_len, 1)
    b = check_int("micro_batch", micro_batch, 1)
    t = check_int("tp", tp, 1)
    recompute = check_choice("recompute", recompute, RECOMPUTE_MODES)
    sbh = float(s) * b * h
    if recompute == "full":
        return 2.0 * sbh / (t if sequence_parallel else 1)
    if recompute == "none":
        if n_heads is None:
            raise ValueError(
                "n_heads=None: the attention-score term 5*a*s/h needs the number "
                "of heads (an integer >= 1), or use recompute='selective'"
            )
        a = check_int("n_heads", n_heads, 1)
        scores = 5.0 * a * s / h
    else:
        scores = 0.0
    if sequence_parallel:
        return sbh * (34.0 + scores) / t
    return sbh * (10.0 + 24.0 / t + scores / t)


def training_memory(
    n_params: float,
    *,
    tp: int = 1,
    pp: int = 1,
    dp: int = 1,
    zero_stage: int = 0,
    weight_bytes: float = 2,
    grad_bytes: float = 2,
    optimizer_bytes: float = 12,
    n_layers: int | None = None,
    hidden: int | None = None,
    seq_len: int | None = None,
    micro_batch: int = 1,
    n_heads: int | None = None,
    sequence_parallel: bool = False,
    recompute: str = "none",
    microbatches: int | None = None,
    schedule: str = "1f1b",
) -> dict:
    """Bytes per GPU to train a model under a (TP, PP, DP, ZeRO) plan.

    Args:
        n_params: parameters of the whole model, > 0.
        tp, pp, dp: tensor-, pipeline- and data-parallel degrees, >= 1
            (the job uses ``tp * pp * dp`` GPUs).
        zero_stage: 0–3, which model state ZeRO shards over ``dp``.
        weight_bytes, grad_bytes, optimizer_bytes: bytes per parameter
            (defaults 2 + 2 + 12, mixed-precision Adam).
        n_layers, hidden, seq_len: model shape; give all three to count
            activations, or none for model state only.
        micro_batch: sequences per micro-batch, >= 1.
        n_heads: attention heads (needed when ``recompute="none"``).
        sequence_parallel: sequence parallelism alongside ``tp``.
        recompute: "none", "selective" or "full" activation recomputation.
        microbatches: micro-batches per step m (None: assume ``m >= pp``).
        schedule: "1f1b" keeps ``min(pp, m)`` micro-batches in flight on the
            first stage, "gpipe" keeps all ``m``.

    Returns:
        dict with ``weights``, ``grads``, ``optimizer``, ``activations`` and
        ``total``, each in bytes per GPU (the busiest, first pipeline stage).
    """
    n = check_float("n_params", n_params, 0.0, low_inclusive=False)
    tp = check_int("tp", tp, 1)
    pp = check_int("pp", pp, 1)
    dp = check_int("dp", dp, 1)
    zero_stage = check_int("zero_stage", zero_stage, 0, 3)
    schedule = check_choice("schedule", schedule, SCHEDULES)
    recompute = check_choice("recompute", recompute, RECOMPUTE_MODES)
    wb = check_float("weight_bytes", weight_bytes, 0.0)
    gb = check_float("grad_bytes", grad_bytes, 0.0)
    ob = check_float("optimizer_bytes", optimizer_bytes, 0.0)
    shape = (n_layers, hidden, seq_len)
    if all(v is None for v in shape):
        per_layer, layers, in_flight = 0.0, 0, 0
    elif any(v is None for v in shape):
        raise ValueError(
            f"n_layers={n_layers!r}, hidden={hidden!r}, seq_len={seq_len!r}: "
            "give all three (integers >= 1) to count activations, or none of them"
        )
    else:
        n_layers = check_int("n_layers", n_layers, 1)
        m = pp if microbatches is None else check_int("microbatches", microbatches, 1)
        in_flight = min(pp, m) if schedule == "1f1b" else m
        per_layer = activation_memory_per_layer(
            hidden,
            seq_len,
            micro_batch,
            n_heads,
            tp=tp,
            sequence_parallel=sequence_parallel,
            recompute=recompute,
        )
        layers = math.ceil(n_layers / pp)
    return _memory_parts(
        n, tp, pp, dp, zero_stage, (wb, gb, ob), per_layer * layers * in_flight
    )


def _memory_parts(n, tp, pp, dp, zero_stage, state_bytes, activations) -> dict:
    """The arithmetic of :func:`training_memory`, on checked inputs (fast path)."""
    local = n / (tp * pp)
    wb, gb, ob = state_bytes
    out = {
        "weights": local * wb / (dp if zero_stage >= 3 else 1),
        "grads": local * gb / (dp if zero_stage >= 2 else 1),
        "optimizer": local * ob / (dp if zero_stage >= 1 else 1),
        "activations": float(activations),
    }
    out["total"] = out["weights"] + out["grads"] + out["optimizer"] + activations
    return out


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
) -> dict:
    """Bytes on one GPU to fine-tune with LoRA (Hu et al. 2021).

    The base model is frozen: its weights stay in 16-bit (``base_bytes``) with
    no gradients and no optimizer state. Each adapted ``h x h`` matrix gets two
    trainable factors of ``rank * h`` parameters, trained with mixed-precision
    Adam (16 bytes each). Backward still runs through every frozen layer, so
    activations are as in :func:`activation_memory_per_layer`.

    Args:
        n_params: parameters of the base model, > 0.
        n_layers, hidden: model shape (integers >= 1).
        rank: LoRA rank r, >= 1.
        adapted_per_layer: matrices adapted per layer (4: q, k, v and o).
        base_bytes: bytes per frozen weight (2 for bf16, about 0.5 for 4-bit).
        seq_len, micro_batch, n_heads, recompute: as for activations; leave
            ``seq_len`` None to count model state only.

    Returns:
        dict like :func:`training_memory`'s, plus ``trainable_params``.
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
            hidden, seq_len, micro_batch, n_heads, recompute=recompute
        )
        out["activations"] = per_layer * n_layers
    out["total"] = sum(out.values())
    out["trainable_params"] = trainable
    return out
