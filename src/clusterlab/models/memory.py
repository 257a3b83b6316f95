"""Memory per GPU for training a transformer: model state, activations, buffers.

Every term of :func:`training_memory`'s result, in bytes per GPU, with its
source (the keys are fixed; :data:`MEMORY_KEYS` lists them):

- ``weights``, ``grads``, ``optimizer``: model state, after ZeRO (Rajbhandari
  et al. 2020). Mixed-precision Adam keeps 2 bytes of bf16 weights, 2 of bf16
  gradients and 12 of fp32 optimizer state (master weights, two moments) per
  parameter. Tensor (``tp``) and pipeline (``pp``) parallelism leave a GPU
  ``n_params / (tp * pp)`` parameters; ZeRO shards them over ``dp``: stage 1 the
  optimizer state, stage 2 the gradients too, stage 3 (FSDP) the weights too.
- ``activations``: what the first pipeline stage keeps for backward: its
  ``ceil(n_layers / pp)`` layers (:mod:`~clusterlab.models.activations`) times
  the micro-batches it holds (:func:`~clusterlab.models.pipeline.
  in_flight_microbatches`: ``min(pp, m)`` under 1F1B, ``m`` under GPipe,
  ``pp + (pp - 1)/v`` interleaved). ``last_stage_activations``: the last
  stage's, one micro-batch under 1F1B.
- ``gathered_weights``: ZeRO-3 keeps no whole layer, so before a layer runs it
  all-gathers that layer's weights (this GPU's tensor-parallel slice of them)
  and frees them after; with prefetch (FSDP's default, ``prefetch=True``) the
  next layer's are gathered while this one computes: two layers' weights
  (Zhao et al. 2023, FSDP). One layer has ``2h^2 (1 + kv/a)`` attention and
  ``2hf`` (GeLU) or ``3hf`` (SwiGLU) MLP parameters: ``12 h^2`` for GPT.
- ``gathered_grads``: ZeRO-3 computes one layer's whole gradient before it
  reduce-scatters it: one layer's gradient in ``grad_bytes``. ZeRO-2's bucket
  of gradients and DDP's buckets are not counted (25 MB by default).
- ``recompute_buffer``: with recomputation, one layer's activations are
  rebuilt during the backward pass
  (:func:`~clusterlab.models.activations.recompute_working_set`).
- ``logits``: the last stage's fp32 logits of one micro-batch and the fp32
  gradient the loss writes over them, ``2 * s * b * vocab * 4 / tp`` bytes
  (the output layer is split over the vocabulary by tensor parallelism, as in
  Megatron-LM); needs ``vocab``.
- ``total``: the peak, the larger of the first stage (state, buffers,
  ``activations``) and the last (state, buffers, ``last_stage_activations``,
  ``logits``); with ``pp = 1`` they are one GPU and everything adds up. The
  buffers are added as if all were alive at once: an upper bound.

Without the model's shape (``n_layers``, ``hidden``, ``seq_len`` all None) only
model state is counted and every other term is 0: the FSDP lab's fp32 case,
``training_memory(n, dp=world, zero_stage=3, weight_bytes=4, grad_bytes=4,
optimizer_bytes=8)``, gives ``16 * n / world`` bytes per rank, and
:func:`model_memory` fills the shape from a ``ModelShape``.

Not counted: the embedding layer's activations, communication buckets, the
CUDA context and allocator fragmentation (the planner leaves 10% free).
"""

from __future__ import annotations

import functools
import math

from clusterlab.core import published
from clusterlab.core.validate import check_choice, check_float, check_int
from clusterlab.models.activations import (
    RECOMPUTE_MODES,
    activation_memory_per_layer,
    layer_params,
    recompute_working_set,
)
from clusterlab.models.pipeline import in_flight_microbatches

SCHEDULES = ("1f1b", "gpipe")


def usable_memory_fraction() -> float:
    """The share of a GPU's memory a plan may fill (``data/step_assumptions.csv``)."""
    return published.value(
        "step_assumptions", "value_fraction", quantity="usable_memory"
    )


#: The same share, read once: the default of every planner and chart.
USABLE_MEMORY_FRACTION = usable_memory_fraction()


#: The keys of :func:`training_memory`'s result, in bytes per GPU.
MEMORY_KEYS = (
    "weights",
    "grads",
    "optimizer",
    "activations",
    "last_stage_activations",
    "gathered_weights",
    "gathered_grads",
    "recompute_buffer",
    "logits",
    "total",
)


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
    n_kv_heads: int | None = None,
    ffn_hidden: int | None = None,
    mlp: str = "gelu",
    vocab: int | None = None,
    sequence_parallel: bool = False,
    recompute: str = "none",
    formula: str = "flash",
    microbatches: int | None = None,
    schedule: str = "1f1b",
    interleave: int = 1,
    prefetch: bool = True,
) -> dict:
    """Peak bytes per GPU to train a model under a (TP, PP, DP, ZeRO) plan.

    Args:
        n_params: parameters of the whole model, > 0.
        tp, pp, dp: tensor-, pipeline- and data-parallel degrees, >= 1
            (the job uses ``tp * pp * dp`` GPUs).
        zero_stage: 0–3, which model state ZeRO shards over ``dp``.
        weight_bytes, grad_bytes, optimizer_bytes: bytes per parameter
            (defaults 2 + 2 + 12, mixed-precision Adam); the gathered buffers
            use ``weight_bytes`` and ``grad_bytes`` too.
        n_layers, hidden, seq_len: model shape; give all three to count
            activations and buffers, or none for model state only.
        micro_batch: sequences per micro-batch, >= 1.
        n_heads, n_kv_heads, ffn_hidden, mlp: the layer's shape (see
            :func:`~clusterlab.models.activations.activation_memory_per_layer`).
        vocab: vocabulary size, for the logits (None: not counted).
        sequence_parallel: sequence parallelism alongside ``tp``.
        recompute: "none", "selective" or "full" activation recomputation.
        formula: "flash" (default: FlashAttention, no dropout) or
            "korthikanti" (GPT layer with materialised scores).
        microbatches: micro-batches per step m (None: assume ``m = pp``, or
            ``2 * pp`` when interleaving).
        schedule: "1f1b" or "gpipe".
        interleave: model chunks per GPU v (interleaved 1F1B), >= 1.
        prefetch: ZeRO-3 gathers the next layer while one computes (two
            layers' weights held) or not (one).

    Returns:
        dict with the keys of :data:`MEMORY_KEYS` (see the module docstring),
        bytes per GPU; ``total`` is the peak of the busiest pipeline stage.
    """
    n = check_float("n_params", n_params, 0.0, low_inclusive=False)
    tp = check_int("tp", tp, 1)
    pp = check_int("pp", pp, 1)
    dp = check_int("dp", dp, 1)
    zero_stage = check_int("zero_stage", zero_stage, 0, 3)
    schedule = check_choice("schedule", schedule, SCHEDULES)
    recompute = check_choice("recompute", recompute, RECOMPUTE_MODES)
    v = check_int("interleave", interleave, 1)
    wb = check_float("weight_bytes", weight_bytes, 0.0)
    gb = check_float("grad_bytes", grad_bytes, 0.0)
    ob = check_float("optimizer_bytes", optimizer_bytes, 0.0)
    shape = (n_layers, hidden, seq_len)
    parts = dict.fromkeys(MEMORY_KEYS[3:-1], 0.0)
    if any(x is None for x in shape) and not all(x is None for x in shape):
        raise ValueError(
            f"n_layers={n_layers!r}, hidden={hidden!r}, seq_len={seq_len!r}: "
            "give all three (integers >= 1) to count activations, or none of them"
        )
    if n_layers is not None:
        n_layers = check_int("n_layers", n_layers, 1)
        default_m = pp * (2 if v > 1 else 1)
        m = default_m if microbatches is None else microbatches
        m = check_int("microbatches", m, 1)
        first = in_flight_microbatches(pp, m, schedule, v, 0)
        last = in_flight_microbatches(pp, m, schedule, v, pp - 1)
        shape = (hidden, seq_len, micro_batch, n_heads, n_kv_heads, ffn_hidden, mlp)
        per_layer, rebuilt, one_layer = _layer_terms(
            *shape, tp, sequence_parallel, recompute, formula
        )
        layers = math.ceil(n_layers / pp)
        parts["activations"] = per_layer * layers * first
        parts["last_stage_activations"] = per_layer * layers * last
        if zero_stage == 3 and dp > 1:
            parts["gathered_weights"] = one_layer * wb * (2 if prefetch else 1)
            parts["gathered_grads"] = one_layer * gb
        parts["recompute_buffer"] = rebuilt
        if vocab is not None:
            vocab = check_int("vocab", vocab, 1)
            parts["logits"] = 2.0 * seq_len * micro_batch * vocab * 4.0 / tp
    return _memory_parts(n, tp, pp, dp, zero_stage, (wb, gb, ob), parts)


@functools.lru_cache(maxsize=4096)
def _layer_terms(h, s, b, a, kv, f, mlp, tp, sp, recompute, formula):
    """Per-layer activations, recompute working set and parameters per TP rank.

    Cached: a planner sweep asks for the same layer many times.
    """
    layer = dict(tp=tp, sequence_parallel=sp, formula=formula)
    layer.update(n_kv_heads=kv, ffn_hidden=f, mlp=mlp)
    per_layer = activation_memory_per_layer(h, s, b, a, recompute=recompute, **layer)
    rebuilt = recompute_working_set(h, s, b, a, recompute=recompute, **layer)
    return per_layer, rebuilt, layer_params(h, a, kv, f, mlp) / tp


def _memory_parts(n, tp, pp, dp, zero_stage, state_bytes, parts) -> dict:
    """The arithmetic of :func:`training_memory`, on checked inputs (fast path).

    ``parts`` holds the activation and buffer terms (keys of MEMORY_KEYS).
    """
    local = n / (tp * pp)
    wb, gb, ob = state_bytes
    out = {
        "weights": local * wb / (dp if zero_stage >= 3 else 1),
        "grads": local * gb / (dp if zero_stage >= 2 else 1),
        "optimizer": local * ob / (dp if zero_stage >= 1 else 1),
    }
    out.update({k: float(parts.get(k, 0.0)) for k in MEMORY_KEYS[3:-1]})
    common = out["weights"] + out["grads"] + out["optimizer"]
    common += out["gathered_weights"] + out["gathered_grads"]
    common += out["recompute_buffer"]
    if pp == 1:
        out["total"] = common + out["activations"] + out["logits"]
    else:
        last = out["last_stage_activations"] + out["logits"]
        out["total"] = common + max(out["activations"], last)
    return out


def model_memory(model, *, seq_len: int | None = None, **plan) -> dict:
    """:func:`training_memory` with the shape taken from a ``ModelShape``.

    Args:
        model: a ``cl.models.compute.ModelShape`` (e.g. ``LLAMA2_70B``).
        seq_len: tokens per sequence (None: the model's context).
        **plan: the other arguments of :func:`training_memory` (tp, pp, dp,
            zero_stage, micro_batch, recompute, formula, ...).

    Returns:
        :func:`training_memory`'s dict.
    """
    shape = dict(
        n_layers=model.n_layers,
        hidden=model.hidden,
        seq_len=model.seq_len if seq_len is None else seq_len,
        n_heads=model.n_heads,
        n_kv_heads=model.n_kv_heads,
        ffn_hidden=model.ffn_hidden,
        mlp=model.mlp,
        vocab=model.vocab,
    )
    return training_memory(model.n_params, **shape, **plan)


__all__ = [
    "MEMORY_KEYS",
    "model_memory",
    "model_state_bytes_per_param",
    "training_memory",
]
