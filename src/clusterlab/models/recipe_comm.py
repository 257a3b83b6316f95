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
  system's bus bandwidth at that message size (by default the
  generation-matched 8 x H200 NVLS sweep; the Scaling Book's two 8 x H100
  points are the labelled pessimistic bound).

``tp_overlap`` hides a share of the tensor-parallel traffic under the GEMMs
(0 by default: plain Megatron-style layers wait for each all-reduce). The
pipeline bubble and the activation sends between stages are left out of
:func:`recipe_step_comm` (:func:`h4_sensitivity` adds the bubble): the
function says how large each part is, not what a run would measure.
"""

from __future__ import annotations

import pandas as pd

from clusterlab.core import published
from clusterlab.core.validate import check_float, check_int
from clusterlab.models.collectives import allreduce_time, allreduce_time_published
from clusterlab.models.compute import flops_per_token
from clusterlab.models.interconnects import (
    DEFAULT_INTRA,
    default_mfu,
    h100_peak_flops,
)
from clusterlab.models.links import as_link
from clusterlab.models.pipeline import bubble_fraction
from clusterlab.models.recipes import Recipe


def recipe_step_comm(
    recipe: Recipe,
    *,
    dp_link="NDR400 InfiniBand",
    tp_system: str = DEFAULT_INTRA,
    peak_flops: float | None = None,
    mfu: float | None = None,
    bytes_per_value: int = 2,
    tp_overlap: float = 0.0,
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
        tp_overlap: the share of the tensor-parallel all-reduces that runs
            under the GEMMs beside them, in [0, 1]: 0 as in plain Megatron-LM
            layers, more with Transformer Engine's ``tp_comm_overlap`` or a
            collective matmul, which split each GEMM and send one part while
            the next computes.

    Returns:
        dict with ``compute_s``, ``dp_shard_bytes``, ``dp_allreduce_s``,
        ``tp_message_bytes``, ``tp_allreduces`` (per GPU and step),
        ``tp_busbw_Bps``, ``tp_allreduce_s``, ``tp_exposed_s`` (what
        ``tp_overlap`` leaves exposed), ``step_s`` (compute + exposed TP + DP,
        no DP overlap), ``dp_share`` (DP over compute + DP, the H4 ratio without
        overlap), ``dp_share_overlapped`` (DP left after hiding behind the
        backward pass, 2/3 of compute, over the step), ``tp_share`` and
        ``comm_share`` (TP + DP over the step).
    """
    peak = h100_peak_flops() if peak_flops is None else peak_flops
    peak = check_float("peak_flops", peak, 0.0, low_inclusive=False)
    mfu = default_mfu() if mfu is None else mfu
    mfu = check_float("mfu", mfu, 0.0, 1.0, low_inclusive=False)
    width = check_int("bytes_per_value", bytes_per_value, 1, 8)
    hide = check_float("tp_overlap", tp_overlap, 0.0, 1.0)
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
    # hidden TP time runs under the GEMMs, so it can hide no more than them
    tp_exposed = tp_s - min(hide * tp_s, compute_s)
    step_s = compute_s + tp_exposed + dp_s
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
        "tp_exposed_s": tp_exposed,
        "step_s": step_s,
        "dp_share": dp_s / (compute_s + dp_s),
        "dp_share_overlapped": exposed_dp / (compute_s + exposed_dp),
        "tp_share": tp_exposed / step_s,
        "comm_share": (tp_exposed + dp_s) / step_s,
    }


#: the curves the tensor-parallel all-reduces are priced on, with their labels
H4_CURVES = {
    "8xH100-scalingbook": "pessimistic bound (two published 8 x H100 points)",
    "8xH200-NVLS-nccl2.27.7": "generation-matched sweep (8 x H200, NVLS, NVLink 4)",
}
#: an exposed TP share from which a step is called communication-bound: a
#: third of the step, where communication takes half as long as arithmetic
COMM_BOUND_SHARE = 1 / 3


def h4_sensitivity(
    recipe: Recipe, *, curves=tuple(H4_CURVES), overlaps=(0.0, 0.5, 0.9),
    published_mfu: float | None = None,
) -> pd.DataFrame:  # fmt: skip
    """Claim H4 over its two unknowns: the TP curve and how much of TP hides.

    Compute is priced at the H100's measured matmul ceiling, the pipeline's
    1F1B bubble ``(p - 1) / (m + p - 1)`` stretches compute and exposed TP
    alike (the end-to-end MFU it is set beside counts the idle stages too),
    the data-parallel all-reduce hides behind the backward pass (2/3 of
    compute), and the tensor-parallel all-reduces are priced on each curve,
    ``tp_overlap`` of them hidden under the GEMMs.

    Args:
        recipe: the layout (``cl.models.recipes.ESSAY_70B``).
        curves: published all-reduce systems (keys of ``H4_CURVES`` or others).
        overlaps: shares of TP hidden, each in [0, 1].
        published_mfu: the end-to-end MFU set beside the model (None: the
            stated assumption, rounded from Llama 3's 38-43%).

    Returns:
        One row per curve and overlap: ``curve``, ``label``, ``tp_overlap``,
        ``tp_busbw_GBps``, ``bubble``, ``tp_exposed_share`` (of the step), ``mfu`` (the
        model's end-to-end MFU), ``near_published`` (within 10% of it) and
        ``comm_bound`` (exposed TP at least ``COMM_BOUND_SHARE`` of the step).
    """
    peak = h100_peak_flops()
    ceiling = published.value("matmul_achieved", "achieved_flops", part="H100 SXM5")
    target = default_mfu() if published_mfu is None else published_mfu
    bubble = bubble_fraction(recipe.pp, recipe.grad_accum)
    rows = []
    for curve in curves:
        for hide in overlaps:
            rc = recipe_step_comm(recipe, tp_system=curve, mfu=ceiling / peak,
                                  tp_overlap=hide)  # fmt: skip
            work = (rc["compute_s"] + rc["tp_exposed_s"]) / (1 - bubble)
            step = work + max(0.0, rc["dp_allreduce_s"] - 2 / 3 * rc["compute_s"])
            mfu = ceiling / peak * rc["compute_s"] / step
            rows.append({
                "curve": curve, "label": H4_CURVES.get(curve, curve),
                "tp_overlap": float(hide), "tp_busbw_GBps": rc["tp_busbw_Bps"] / 1e9,
                "bubble": bubble,
                "tp_exposed_share": rc["tp_exposed_s"] / step, "mfu": mfu,
                "near_published": abs(mfu / target - 1) < 0.10,
                "comm_bound": rc["tp_exposed_s"] / step >= COMM_BOUND_SHARE,
            })  # fmt: skip
    return pd.DataFrame(rows)


__all__ = ["COMM_BOUND_SHARE", "H4_CURVES", "h4_sensitivity", "recipe_step_comm"]
