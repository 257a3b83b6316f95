"""How much of a training recipe's step is communication (the networks chapter's H4).

For a stated recipe (``cl.models.recipes``: model, TP x PP x DP layout,
micro-batch, accumulation, recomputation) one optimizer step costs:

- compute: FLOPs per token (6N + 12 L h s) x tokens per step, over every GPU's
  peak x MFU;
- the data-parallel all-reduce: each GPU holds ``1/(tp*pp)`` of the model and
  all-reduces that shard's bf16 gradients with its ``dp - 1`` peers in the
  other replicas, through its own network port (one per GPU), as a ring;
- the tensor-parallel all-reduces: per layer and micro-batch 4 of them (2
  forward, 2 backward; 6 with full recomputation), each of one micro-batch's
  activations (``s * b * h`` bf16 values), inside the node at a published
  system's bus bandwidth at that message size.

Nothing here overlaps tensor-parallel traffic with compute (Megatron-style
layers wait for each all-reduce), and the pipeline bubble and the activation
sends between stages are left out: the function says how large each part is,
not what a run would measure.
"""

from __future__ import annotations

from clusterlab.core.validate import check_float, check_int
from clusterlab.models.collectives import allreduce_time, allreduce_time_published
from clusterlab.models.compute import flops_per_token
from clusterlab.models.interconnects import DEFAULT_INTRA, default_mfu, h100_peak_flops
from clusterlab.models.links import as_link
from clusterlab.models.recipes import Recipe


def recipe_step_comm(
    recipe: Recipe,
    *,
    dp_link="NDR400 InfiniBand",
    tp_system: str = DEFAULT_INTRA,
    peak_flops: float | None = None,
    mfu: float | None = None,
    bytes_per_value: int = 2,
) -> dict:
    """Compute, DP all-reduce and TP all-reduce seconds of one optimizer step.

    Args:
        recipe: the layout (e.g. ``cl.models.recipes.ESSAY_70B``).
        dp_link: the link each GPU's gradient all-reduce crosses, one port per
            GPU (a name in ``cl.models.links.LINKS`` or a ``Link``).
        tp_system: a published all-reduce system for the tensor-parallel group
            (``cl.published.collective_systems()``).
        peak_flops: one GPU's peak FLOP/s (None: the H100 SXM5's dense BF16).
        mfu: model FLOP utilisation in (0, 1] (None: the stated assumption).
        bytes_per_value: bytes per gradient and activation value, in [1, 8].

    Returns:
        dict with ``compute_s``, ``dp_shard_bytes``, ``dp_allreduce_s``,
        ``tp_message_bytes``, ``tp_allreduces`` (per GPU and step),
        ``tp_busbw_Bps``, ``tp_allreduce_s``, ``step_s`` (compute + TP + DP, no
        overlap), ``dp_share`` (DP over compute + DP, the H4 ratio without
        overlap), ``dp_share_overlapped`` (DP left after hiding behind the
        backward pass, 2/3 of compute, over the step), ``tp_share`` and
        ``comm_share`` (TP + DP over the step).
    """
    peak = h100_peak_flops() if peak_flops is None else peak_flops
    peak = check_float("peak_flops", peak, 0.0, low_inclusive=False)
    mfu = default_mfu() if mfu is None else mfu
    mfu = check_float("mfu", mfu, 0.0, 1.0, low_inclusive=False)
    width = check_int("bytes_per_value", bytes_per_value, 1, 8)
    model, link = recipe.model, as_link(dp_link)
    s = model.seq_len
    per_token = flops_per_token(model.n_params, model.n_layers, model.hidden, s)
    compute_s = per_token * recipe.tokens_per_step / (recipe.n_gpus * peak * mfu)
    shard = width * recipe.grad_shard_params
    dp_s = allreduce_time(shard, recipe.dp, link.alpha_s, link.effective_Bps)
    message = width * s * recipe.micro_batch * model.hidden
    layers = -(-model.n_layers // recipe.pp)  # layers on one pipeline stage
    per_layer = 6 if recipe.recompute == "full" else 4
    count = per_layer * layers * recipe.grad_accum if recipe.tp > 1 else 0
    one = allreduce_time_published(message, recipe.tp, tp_system)
    tp_s = count * one
    step_s = compute_s + tp_s + dp_s
    exposed_dp = max(0.0, dp_s - 2 / 3 * compute_s)
    return {
        "compute_s": compute_s,
        "dp_shard_bytes": shard,
        "dp_allreduce_s": dp_s,
        "tp_message_bytes": message,
        "tp_allreduces": count,
        "tp_busbw_Bps": 2 * (recipe.tp - 1) / recipe.tp * message / one
        if one > 0
        else float("nan"),
        "tp_allreduce_s": tp_s,
        "step_s": step_s,
        "dp_share": dp_s / (compute_s + dp_s),
        "dp_share_overlapped": exposed_dp / (compute_s + exposed_dp),
        "tp_share": tp_s / step_s,
        "comm_share": (tp_s + dp_s) / step_s,
    }


__all__ = ["recipe_step_comm"]
