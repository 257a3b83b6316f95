"""Parallelism planner: which (TP, PP, DP, ZeRO, recomputation) plans fit, and how fast.

For a model, a GPU count and the GPU's memory, :func:`plan` lists every plan
``tp * pp * dp = n_gpus`` with ZeRO stage 0–3, recomputation none, selective
or full, and sequence parallelism on or off, and gives for each the peak
memory per GPU (:func:`~clusterlab.models.memory.model_memory`, buffers and
logits included), the pipeline bubble
(:func:`~clusterlab.models.pipeline.bubble_fraction`), the bytes each GPU sends
per step, and an estimate of step time, tokens/s and MFU.

The time model is deliberately small, and every term is a column you can read:

- compute: hardware FLOPs per GPU (6N + 12Lhs per token, plus recomputed
  work) at the matmul efficiency of ``data/matmul_achieved.csv`` (Bekman's
  794.5 of 989 TFLOP/s for the best H100 matmuls);
- tensor parallelism: 4 all-reduces of ``s*b*h`` 16-bit values per layer and
  micro-batch (2 forward, 2 backward; 6 with full recomputation; sequence
  parallelism swaps each for an all-gather plus a reduce-scatter of the same
  bytes), all **exposed** (nothing overlaps them). Inside a node each takes
  the published all-reduce bus bandwidth at its own message size
  (:func:`~clusterlab.models.collectives.bus_bandwidth`, default system
  ``"8xH100-scalingbook"``); across nodes, a ring at the network link's rate;
- pipeline parallelism: per micro-batch and stage boundary one activation
  tensor forward and its gradient back, ``2*s*b*h`` bytes each, sent with
  Megatron's scatter/gather over the ``t`` tensor-parallel ranks (Narayanan et
  al. 2021, section 4.1): each GPU sends ``1/t`` of it, ``2*m*(2*s*b*h)/t``
  bytes per step;
- data parallelism: a gradient all-reduce (ZeRO 0–2) or reduce-scatter plus
  two all-gathers of the weights (ZeRO-3, 1.5x the bytes; Rajbhandari et al.
  2020) of this GPU's ``1/(t*p)`` shard, each GPU over its own network port
  (a ring at ``cl.models.links.LINKS[inter_node_link]``), hidden behind the
  backward pass (forward and backward for ZeRO-3) where it is shorter;
- the bubble stretches the per-micro-batch work: step = work / (1 - bubble).

MFU is the book's definition (6N + 12Lhs per token, see
:mod:`~clusterlab.models.compute`). The model ignores kernel launch gaps,
stragglers and failures: it says which plans are worth trying, not what a run
will measure.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .._validate import check_float, check_int
from .compute import H100_SXM, ModelShape, flops_per_token
from .links import LINKS, as_link
from .memory import RECOMPUTE_MODES, model_memory
from .pipeline import bubble_fraction
from .planner_comm import (
    DEFAULT_INTER_NODE_LINK,
    DEFAULT_INTRA_NODE_SYSTEM,
    _busbw,
    _dp_s,
    _tp_s,
    matmul_efficiency_of,
)
from .recipes import Recipe

__all__ = ["plan", "plan_row", "recipe_row"]


def _extra_flops_per_token(model, s, recompute, formula):
    """Hardware FLOPs per token beyond 6N + 12Lhs that recomputation adds.

    Full recomputation reruns the forward pass (2N + 4Lhs). Recomputing the
    scores costs QK^T again, 2Lhs, under FlashAttention (its backward always
    does) and QK^T and the product with V, 4Lhs, under Korthikanti's
    selective recomputation.
    """
    attn = model.n_layers * model.hidden * s
    scores = 2.0 * attn if formula == "flash" else 4.0 * attn
    extra = scores if formula == "flash" or recompute == "selective" else 0.0
    if recompute == "full":
        extra += 2.0 * model.n_params + 4.0 * attn
    return extra


def plan_row(
    model: ModelShape,
    *,
    tp: int,
    pp: int,
    dp: int,
    zero_stage: int,
    recompute: str,
    sequence_parallel: bool,
    global_batch: int,
    micro_batch: int = 1,
    seq_len: int | None = None,
    gpu_memory_bytes: float | None = None,
    peak_flops: float | None = None,
    usable_fraction: float = 0.9,
    gpus_per_node: int = 8,
    intra_node_system: str = DEFAULT_INTRA_NODE_SYSTEM,
    inter_node_link=DEFAULT_INTER_NODE_LINK,
    matmul_efficiency: float | None = None,
    formula: str = "flash",
) -> dict:
    """Memory, bubble, communication and speed of one plan (see the module).

    Args:
        model: the model's shape (e.g. ``cl.models.compute.LLAMA2_70B``).
        tp, pp, dp, zero_stage, recompute, sequence_parallel: the plan.
        global_batch: sequences per optimizer step, >= 1.
        micro_batch: sequences per micro-batch of one replica, >= 1.
        seq_len: tokens per sequence (None: the model's context).
        gpu_memory_bytes: memory of one GPU (None: the H100 SXM5's, from data).
        peak_flops: peak dense 16-bit FLOP/s of one GPU (None: likewise).
        usable_fraction: share of memory a plan may fill (the rest is for the
            CUDA context, communication buffers and fragmentation).
        gpus_per_node: GPUs joined by NVLink.
        intra_node_system: published all-reduce sweep inside a node.
        inter_node_link: network link between nodes (``LINKS`` name or Link).
        matmul_efficiency: share of peak the matmuls reach (None: the H100's
            from ``data/matmul_achieved.csv``).
        formula: activation formula, "flash" (default) or "korthikanti".

    Returns:
        dict of plan, memory (bytes, the keys of ``MEMORY_KEYS`` + ``_bytes``,
        ``memory_bytes`` the peak), ``fits``, micro-batches, bubble, bytes
        sent per GPU per step, seconds per step, ``tokens_per_s``, ``mfu``.
    """
    s = model.seq_len if seq_len is None else check_int("seq_len", seq_len, 1)
    b = check_int("micro_batch", micro_batch, 1)
    batch = check_int("global_batch", global_batch, 1)
    usable = check_float("usable_fraction", usable_fraction, 0.0, 1.0)
    mem_cap = H100_SXM.memory_bytes if gpu_memory_bytes is None else gpu_memory_bytes
    peak = H100_SXM.peak_flops if peak_flops is None else peak_flops
    eff = matmul_efficiency_of() if matmul_efficiency is None else matmul_efficiency
    eff = check_float("matmul_efficiency", eff, 0.0, 1.0, low_inclusive=False)
    n_gpus = tp * pp * dp
    m_exact = batch / (dp * b)
    m = int(m_exact) if m_exact >= 1 and m_exact == int(m_exact) else 0
    mem = model_memory(
        model, seq_len=s, tp=tp, pp=pp, dp=dp, zero_stage=zero_stage,
        micro_batch=b, sequence_parallel=sequence_parallel, recompute=recompute,
        formula=formula, microbatches=max(m, 1),
    )  # fmt: skip
    row = dict(tp=tp, pp=pp, dp=dp, zero_stage=zero_stage, recompute=recompute)
    row["sequence_parallel"] = sequence_parallel
    row.update({f"{k}_bytes": v for k, v in mem.items()})
    row["memory_bytes"] = row.pop("total_bytes")
    row["fits"] = mem["total"] <= usable * mem_cap
    row["batch_ok"] = m >= 1
    row["microbatches"] = m
    nan = float("nan")
    if not m:  # the global batch cannot be split this way: no speed to give
        row.update(bubble=nan, tp_comm_bytes=nan, pp_comm_bytes=nan)
        row.update(dp_comm_bytes=nan, step_s=nan, tokens_per_s=nan, mfu=nan)
        return row
    bubble = bubble_fraction(pp, m)
    layers = math.ceil(model.n_layers / pp)
    tokens = batch * s
    per_token = flops_per_token(model.n_params, model.n_layers, model.hidden, s)
    hw_per_token = per_token + _extra_flops_per_token(model, s, recompute, formula)
    compute_s = hw_per_token * tokens / n_gpus / (peak * eff)
    net = as_link(inter_node_link)
    # Tensor parallelism: all-reduces of one micro-batch's activations (bf16).
    act_bytes = 2.0 * s * b * model.hidden
    tp_count = (6 if recompute == "full" else 4) * layers * m
    tp_sent = 0.0 if tp == 1 else tp_count * act_bytes * 2 * (tp - 1) / tp
    one_tp_s = _tp_s(act_bytes, tp, gpus_per_node, intra_node_system, net)
    tp_s = tp_count * one_tp_s
    # Pipeline: activations forward, gradients back, scattered over the TP ranks.
    pp_msg = act_bytes / tp
    pp_sent = 0.0 if pp == 1 else 2 * m * pp_msg
    # Inside a node NVLink's all-reduce busbw at that size stands in for p2p.
    inside = tp * pp <= gpus_per_node
    pp_bw = _busbw(pp_msg, intra_node_system) if inside else net.effective_Bps
    pp_s = pp_sent / pp_bw
    # Data parallelism: gradients (and for ZeRO-3 weights) of this GPU's slice.
    grad_bytes = 2.0 * model.n_params / (tp * pp)
    factor = 1.5 if zero_stage == 3 else 1.0
    dp_sent = 0.0 if dp == 1 else factor * grad_bytes * 2 * (dp - 1) / dp
    inside = n_gpus <= gpus_per_node
    dp_s = factor * _dp_s(grad_bytes, dp, inside, intra_node_system, net)
    hidden_by = compute_s * (1.0 if zero_stage == 3 else 2.0 / 3.0)
    step_s = (compute_s + tp_s + pp_s) / (1.0 - bubble) + max(0.0, dp_s - hidden_by)
    row.update(bubble=bubble, tp_comm_bytes=tp_sent, pp_comm_bytes=pp_sent)
    row.update(dp_comm_bytes=dp_sent, compute_s=compute_s, tp_comm_s=tp_s)
    row.update(tp_allreduce_bytes=act_bytes, tp_allreduce_s=one_tp_s)
    row.update(pp_comm_s=pp_s, dp_comm_s=dp_s, step_s=step_s)
    row["tokens_per_s"] = tokens / step_s
    row["mfu"] = row["tokens_per_s"] * per_token / (n_gpus * peak)
    return row


def recipe_row(recipe: Recipe, **kwargs) -> dict:
    """:func:`plan_row` for a stated recipe (e.g. ``cl.models.recipes.ESSAY_70B``).

    Args:
        recipe: the layout, micro-batch, accumulation and recomputation.
        **kwargs: more :func:`plan_row` arguments (GPU, links, formula...).

    Returns:
        :func:`plan_row`'s dict; its ``microbatches`` is the recipe's
        ``grad_accum`` because ``global_batch`` is the recipe's.
    """
    plan = dict(tp=recipe.tp, pp=recipe.pp, dp=recipe.dp)
    plan.update(zero_stage=recipe.zero_stage, recompute=recipe.recompute)
    plan.update(sequence_parallel=recipe.sequence_parallel)
    plan.update(global_batch=recipe.global_batch, micro_batch=recipe.micro_batch)
    plan.update(gpus_per_node=recipe.gpus_per_node)
    return plan_row(recipe.model, **(plan | kwargs))


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def plan(
    model: ModelShape,
    n_gpus: int,
    *,
    global_batch: int,
    micro_batch: int = 1,
    tp_options=(1, 2, 4, 8),
    zero_stages=(0, 1, 2, 3),
    recompute_modes=RECOMPUTE_MODES,
    max_pp: int = 64,
    **kwargs,
) -> pd.DataFrame:
    """Every (TP, PP, DP, ZeRO, recomputation, SP) plan for ``n_gpus`` GPUs.

    Args:
        model: the model's shape.
        n_gpus: GPUs in the job, >= 1.
        global_batch: sequences per optimizer step, >= 1.
        micro_batch: sequences per micro-batch, >= 1.
        tp_options: tensor-parallel degrees to try (each must divide the heads).
        zero_stages: ZeRO stages to try.
        recompute_modes: recomputation modes to try.
        max_pp: largest pipeline degree to try (and at most the layers).
        **kwargs: passed to :func:`plan_row` (GPU memory, peak, links...).

    Returns:
        One row per plan (columns of :func:`plan_row`), feasible plans first,
        fastest first; ``feasible`` = fits in memory and splits the batch.
    """
    n_gpus = check_int("n_gpus", n_gpus, 1)
    check_int("global_batch", global_batch, 1)
    max_pp = check_int("max_pp", max_pp, 1)
    if "inter_node_link" in kwargs:  # resolve a name once, not once per row
        kwargs["inter_node_link"] = as_link(kwargs["inter_node_link"])
    else:
        kwargs["inter_node_link"] = LINKS[DEFAULT_INTER_NODE_LINK]
    if kwargs.get("matmul_efficiency") is None:
        kwargs["matmul_efficiency"] = matmul_efficiency_of()
    rows = []
    for tp in tp_options:
        tp = check_int("tp", tp, 1)
        if n_gpus % tp or model.n_heads % tp:
            continue
        for pp in _divisors(n_gpus // tp):
            if pp > min(max_pp, model.n_layers):
                continue
            dp = n_gpus // (tp * pp)
            for zero in zero_stages if dp > 1 else (0,):
                for rc in recompute_modes:
                    for sp in (False, True) if tp > 1 else (False,):
                        rows.append(
                            plan_row(
                                model,
                                tp=tp,
                                pp=pp,
                                dp=dp,
                                zero_stage=zero,
                                recompute=rc,
                                sequence_parallel=sp,
                                global_batch=global_batch,
                                micro_batch=micro_batch,
                                **kwargs,
                            )
                        )
    if not rows:
        raise ValueError(
            f"n_gpus={n_gpus}: no tensor-parallel degree in tp_options={tp_options} "
            f"divides both it and the {model.n_heads} heads"
        )
    df = pd.DataFrame(rows)
    df["feasible"] = df["fits"] & df["batch_ok"]
    df["tokens_per_s"] = df["tokens_per_s"].astype(float)
    order = np.lexsort((-df["tokens_per_s"].fillna(-1).to_numpy(), ~df["feasible"]))
    return df.iloc[order].reset_index(drop=True)
