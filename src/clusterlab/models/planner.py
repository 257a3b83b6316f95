"""Parallelism planner: which (TP, PP, DP, ZeRO, recomputation) plans fit, and how fast.

For a model, a GPU count and the GPU's memory, :func:`plan` lists every plan
``tp * pp * dp = n_gpus`` with ZeRO stage 0–3, recomputation none, selective
or full, and sequence parallelism on or off, and gives for each the memory per
GPU (:func:`~clusterlab.models.memory.training_memory`), the pipeline bubble
(:func:`~clusterlab.models.pipeline.bubble_fraction`), the bytes each GPU sends
per step, and an estimate of step time, tokens/s and MFU.

The time model is deliberately small, and every term is a column you can read:

- compute: hardware FLOPs per GPU (6N + 12Lhs per token, plus the recomputed
  forward work) at ``matmul_efficiency`` of peak (Bekman measured 794.5 of
  989 TFLOP/s, 80%, for the best H100 matmuls);
- tensor parallelism: 4 all-reduces of ``s*b*h`` 16-bit values per layer and
  micro-batch (2 forward, 2 backward; 6 with full recomputation; sequence
  parallelism swaps each for an all-gather plus a reduce-scatter of the same
  bytes), exposed, at the NVLink bus bandwidth inside a node;
- pipeline parallelism: one activation tensor sent forward and one gradient
  back per micro-batch and stage boundary, split over the TP ranks;
- data parallelism: a gradient all-reduce (ZeRO 0–2) or reduce-scatter plus
  two all-gathers of the weights (ZeRO-3, 1.5x the bytes; Rajbhandari et al.
  2020), hidden behind the backward pass (forward and backward for ZeRO-3)
  where it is shorter, at the inter-node bandwidth;
- the bubble stretches the per-micro-batch work: step = work / (1 - bubble).

It ignores overlap of TP communication, kernel launch gaps, stragglers and
failures: it says which plans are worth trying, not what a run will measure.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .._validate import check_float, check_int
from .compute import H100_SXM, ModelShape, flops_per_token
from .memory import RECOMPUTE_MODES, _memory_parts, activation_memory_per_layer
from .pipeline import bubble_fraction

__all__ = ["plan", "plan_row", "NVLINK_BUSBW_BPS", "NDR_BUSBW_BPS"]

#: All-reduce bus bandwidth of 8 H100 on NVLink 4: about 370 GB/s of the
#: 450 GB/s per direction (How to Scale Your Model, "How to Think About GPUs").
NVLINK_BUSBW_BPS = 370e9
#: Between nodes one NDR400 port per GPU carries 50 GB/s per direction; we take
#: 80% of it, the share Bekman measured for A100 NVLink (235 of 300 GB/s).
NDR_BUSBW_BPS = 40e9


def _ring_s(nbytes, n, busbw):
    """Time of an all-reduce of ``nbytes`` on ``n`` ranks at bus bandwidth."""
    return 0.0 if n == 1 else nbytes * 2 * (n - 1) / n / busbw


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
    gpu_memory_bytes: float = H100_SXM.memory_bytes,
    peak_flops: float = H100_SXM.peak_flops,
    usable_fraction: float = 0.9,
    gpus_per_node: int = 8,
    intra_node_busbw_Bps: float = NVLINK_BUSBW_BPS,
    inter_node_busbw_Bps: float = NDR_BUSBW_BPS,
    matmul_efficiency: float = 0.8,
    act_per_layer: float | None = None,
) -> dict:
    """Memory, bubble, communication and speed of one plan (see the module).

    Args:
        model: the model's shape (e.g. ``cl.models.compute.LLAMA2_70B``).
        tp, pp, dp, zero_stage, recompute, sequence_parallel: the plan.
        global_batch: sequences per optimizer step, >= 1.
        micro_batch: sequences per micro-batch, >= 1.
        seq_len: tokens per sequence (None: the model's context).
        gpu_memory_bytes: memory of one GPU in bytes.
        peak_flops: peak dense 16-bit FLOP/s of one GPU.
        usable_fraction: share of memory a plan may fill (the rest is for
            buffers, fragmentation and the CUDA context).
        gpus_per_node: GPUs joined by NVLink.
        intra_node_busbw_Bps, inter_node_busbw_Bps: all-reduce bus bandwidth
            inside a node and between nodes, bytes/s.
        matmul_efficiency: share of peak the matmuls reach.
        act_per_layer: activation bytes per layer, if already known (plan()
            passes it so that a sweep computes it once per TP/SP/recompute).

    Returns:
        dict of plan, memory (bytes), ``fits``, micro-batches, bubble,
        bytes sent per GPU per step, seconds per step, ``tokens_per_s``, ``mfu``.
    """
    s = model.seq_len if seq_len is None else check_int("seq_len", seq_len, 1)
    b = check_int("micro_batch", micro_batch, 1)
    batch = check_int("global_batch", global_batch, 1)
    usable = check_float("usable_fraction", usable_fraction, 0.0, 1.0)
    eff = check_float("matmul_efficiency", matmul_efficiency, 0.0, 1.0)
    n_gpus = tp * pp * dp
    m_exact = batch / (dp * b)
    m = int(m_exact) if m_exact >= 1 and m_exact == int(m_exact) else 0
    if act_per_layer is None:
        act_per_layer = activation_memory_per_layer(
            model.hidden, s, b, model.n_heads, tp=tp,
            sequence_parallel=sequence_parallel, recompute=recompute,
        )  # fmt: skip
    # Same arithmetic as training_memory (1F1B, min(pp, m) micro-batches held);
    # plan() checks the inputs once instead of once per row.
    in_flight = min(pp, max(m, 1))
    act = act_per_layer * math.ceil(model.n_layers / pp) * in_flight
    mem = _memory_parts(model.n_params, tp, pp, dp, zero_stage, (2, 2, 12), act)
    row = dict(tp=tp, pp=pp, dp=dp, zero_stage=zero_stage, recompute=recompute)
    row["sequence_parallel"] = sequence_parallel
    row.update({f"{k}_bytes": v for k, v in mem.items()})
    row["memory_bytes"] = row.pop("total_bytes")
    row["fits"] = mem["total"] <= usable * gpu_memory_bytes
    row["batch_ok"] = m >= 1
    row["microbatches"] = m
    nan = float("nan")
    if not m:  # the global batch cannot be split this way: no speed to give
        row.update(bubble=nan, tp_comm_bytes=nan, pp_comm_bytes=nan)
        row.update(dp_comm_bytes=nan, step_s=nan, tokens_per_s=nan, mfu=nan)
        return row
    bubble = bubble_fraction(pp, m)
    layers = math.ceil(model.n_layers / pp)
    h = model.hidden
    tokens = batch * s
    per_token = flops_per_token(model.n_params, model.n_layers, h, s)
    extra = {"none": 0.0, "selective": 4.0 * model.n_layers * h * s}
    extra["full"] = 2.0 * model.n_params + 4.0 * model.n_layers * h * s
    compute_s = (per_token + extra[recompute]) * tokens / n_gpus / (peak_flops * eff)
    # Tensor parallelism: all-reduces of one micro-batch's activations (bf16).
    act_bytes = 2.0 * s * b * h
    tp_count = (6 if recompute == "full" else 4) * layers * m
    tp_bw = intra_node_busbw_Bps if tp <= gpus_per_node else inter_node_busbw_Bps
    tp_sent = 0.0 if tp == 1 else tp_count * act_bytes * 2 * (tp - 1) / tp
    tp_s = tp_count * _ring_s(act_bytes, tp, tp_bw)
    # Pipeline: activations forward, gradients back, split over the TP ranks.
    pp_sent = 0.0 if pp == 1 else 2 * m * act_bytes / tp
    pp_bw = intra_node_busbw_Bps if tp * pp <= gpus_per_node else inter_node_busbw_Bps
    pp_s = pp_sent / pp_bw
    # Data parallelism: gradients (and for ZeRO-3 weights) of this GPU's slice.
    grad_bytes = 2.0 * model.n_params / (tp * pp)
    factor = 1.5 if zero_stage == 3 else 1.0
    dp_bw = intra_node_busbw_Bps if n_gpus <= gpus_per_node else inter_node_busbw_Bps
    dp_sent = 0.0 if dp == 1 else factor * grad_bytes * 2 * (dp - 1) / dp
    dp_s = factor * _ring_s(grad_bytes, dp, dp_bw)
    hidden_by = compute_s * (1.0 if zero_stage == 3 else 2.0 / 3.0)
    step_s = (compute_s + tp_s + pp_s) / (1.0 - bubble) + max(0.0, dp_s - hidden_by)
    row.update(bubble=bubble, tp_comm_bytes=tp_sent, pp_comm_bytes=pp_sent)
    row.update(dp_comm_bytes=dp_sent, compute_s=compute_s, tp_comm_s=tp_s)
    row.update(pp_comm_s=pp_s, dp_comm_s=dp_s, step_s=step_s)
    row["tokens_per_s"] = tokens / step_s
    row["mfu"] = row["tokens_per_s"] * per_token / (n_gpus * peak_flops)
    return row


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
        **kwargs: passed to :func:`plan_row` (GPU memory, peak, bandwidths...).

    Returns:
        One row per plan (columns of :func:`plan_row`), feasible plans first,
        fastest first; ``feasible`` = fits in memory and splits the batch.
    """
    n_gpus = check_int("n_gpus", n_gpus, 1)
    check_int("global_batch", global_batch, 1)
    max_pp = check_int("max_pp", max_pp, 1)
    rows = []
    seq_len = kwargs.get("seq_len") or model.seq_len
    act = {}  # activation bytes per layer, by (tp, sp, recompute)
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
                        if (tp, sp, rc) not in act:
                            act[tp, sp, rc] = activation_memory_per_layer(
                                model.hidden, seq_len, micro_batch, model.n_heads,
                                tp=tp, sequence_parallel=sp, recompute=rc,
                            )  # fmt: skip
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
                                act_per_layer=act[tp, sp, rc],
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
