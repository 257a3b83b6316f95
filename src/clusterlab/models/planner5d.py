"""Five-dimensional planner: DP x TP x PP x CP x EP, ZeRO, recomputation, precision.

:func:`plan5d_row` extends the 3-D plan by two dimensions and one knob; with
``cp = ep = 1`` in bf16 it is the 3-D plan (``cl.models.planner.plan_row``
calls it so, and drops the 5-D columns). The job uses ``tp * cp * pp * dp`` GPUs,
placed in Megatron-LM's order: tensor-parallel ranks innermost (neighbours on
NVLink), then context-parallel, then expert- and data-parallel, pipeline
outermost. Each extra term is a column:

- **context parallelism** (``cp``): each GPU holds ``s / cp`` tokens of every
  sequence, so activations, TP messages and PP messages shrink by ``cp``. Ring
  attention passes each rank's keys and values around the ring,
  ``cl.models.context_parallel.cp_kv_bytes_per_rank`` per layer forward, twice
  that backward (keys and values again, and their gradients), once more with
  full recomputation; the passes overlap the layer's attention arithmetic
  (12 h s of FLOPs per token), and only what that cannot hide is counted.
  The gradients are reduced over ``dp * cp`` ranks, which ZeRO also shards over.
- **expert parallelism** (``ep``, MoE models only, carved out of ``dp * cp``):
  each MoE layer and micro-batch sends a dispatch and a combine all-to-all
  forward and both again backward (``cl.models.moe``), inside NVLink for the
  part of the group that shares a node and over the network for the rest;
  ``ep_overlap`` is the share hidden behind compute (0: none, as in plain
  Megatron; DeepSeek-V3's DualPipe hides nearly all). Routed experts' state is
  split over ``pp * ep`` GPUs and sharded by ZeRO over ``dp * cp / ep``.
- **precision**: the matmuls run at that precision's peak
  (``cl.models.precision.peak_flops``) at the same achieved share of it;
  activations are kept and sent in 16 bits (4 bytes in fp32); the MoE
  dispatch is sent in the precision itself (fp8 dispatch, 16-bit combine, as
  DeepSeek-V3 does); model state is 2 + 2 + 12 bytes per parameter (4 + 4 + 8
  in fp32).

Like the 3-D planner it is an upper-bound estimate that says which plans are
worth trying, not what a run will measure.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from .._validate import check_choice, check_float, check_int
from . import precision as _precision
from .compute import flops_per_token
from .links import LINKS, as_link
from .memory import RECOMPUTE_MODES
from .pipeline import bubble_fraction
from .planner5d_terms import _cp_s, _ep_s, _gpu_figures, _memory, _state_bytes
from .planner_comm import (
    DEFAULT_INTER_NODE_LINK,
    DEFAULT_INTRA_NODE_SYSTEM,
    _busbw,
    _dp_s,
    _tp_s,
    matmul_efficiency_of,
)
from .planner_moe import MoEShape, dense_shape, split_params

__all__ = ["plan5d", "plan5d_row"]


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


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def plan5d_row(
    model,
    *,
    tp: int,
    pp: int,
    dp: int,
    cp: int = 1,
    ep: int = 1,
    zero_stage: int,
    recompute: str,
    sequence_parallel: bool,
    global_batch: int,
    micro_batch: int = 1,
    precision: str = "bf16",
    seq_len: int | None = None,
    gpu: str = "H100 SXM5",
    gpu_memory_bytes: float | None = None,
    peak_flops: float | None = None,
    usable_fraction: float = 0.9,
    gpus_per_node: int = 8,
    intra_node_system: str = DEFAULT_INTRA_NODE_SYSTEM,
    inter_node_link=DEFAULT_INTER_NODE_LINK,
    matmul_efficiency: float | None = None,
    ep_overlap: float = 0.0,
    formula: str = "flash",
) -> dict:
    """Memory, bubble, communication and speed of one 5-D plan (see the module).

    Args:
        model: a dense ``ModelShape`` or a ``cl.models.planner_moe.MoEShape``.
        tp, pp, dp, cp, ep: the degrees (``ep`` divides ``dp * cp`` and the
            experts; 1 for a dense model); the job uses ``tp*cp*pp*dp`` GPUs.
        zero_stage, recompute, sequence_parallel: as in ``plan_row``.
        global_batch, micro_batch: sequences per step and per micro-batch.
        precision: "fp32", "bf16", "fp16" or "fp8" (see the module).
        seq_len: tokens per sequence (None: the model's), a multiple of ``cp``.
        gpu: a ``part`` of ``data/gpu_specs.csv`` (its memory and peak).
        gpu_memory_bytes, peak_flops: override the GPU's memory and peak FLOP/s.
        usable_fraction, gpus_per_node, intra_node_system, inter_node_link,
            matmul_efficiency, formula: as in ``plan_row``.
        ep_overlap: share of the all-to-all time hidden behind compute, [0, 1].

    Returns:
        ``plan_row``'s keys, plus ``cp``, ``ep``, ``precision``,
        ``expert_state_bytes``, ``cp_comm_bytes``, ``cp_comm_s``,
        ``ep_comm_bytes``, ``ep_comm_s``; bytes per GPU, seconds per step.
    """
    moe = isinstance(model, MoEShape)
    shape = dense_shape(model)
    s = shape.seq_len if seq_len is None else check_int("seq_len", seq_len, 1)
    tp, pp, dp = (check_int(k, v, 1) for k, v in (("tp", tp), ("pp", pp), ("dp", dp)))
    cp, ep = check_int("cp", cp, 1), check_int("ep", ep, 1)
    if s % cp:
        raise ValueError(f"cp={cp} must divide seq_len={s} (tokens per sequence)")
    if ep > 1 and not moe:
        raise ValueError(f"ep={ep}: {shape.name} is dense; ep must be 1")
    if (dp * cp) % ep or (moe and model.n_experts % ep):
        experts = f" and the {model.n_experts} experts" if moe else ""
        raise ValueError(f"ep={ep} must divide dp*cp={dp * cp}{experts}")
    precision = check_choice("precision", precision, _precision.PRECISIONS)
    b = check_int("micro_batch", micro_batch, 1)
    batch = check_int("global_batch", global_batch, 1)
    usable = check_float("usable_fraction", usable_fraction, 0.0, 1.0)
    hide_ep = check_float("ep_overlap", ep_overlap, 0.0, 1.0)
    gpu_bytes, gpu_peak = _gpu_figures(gpu, precision)
    mem_cap = gpu_bytes if gpu_memory_bytes is None else gpu_memory_bytes
    peak = gpu_peak if peak_flops is None else peak_flops
    eff = matmul_efficiency_of() if matmul_efficiency is None else matmul_efficiency
    eff = check_float("matmul_efficiency", eff, 0.0, 1.0, low_inclusive=False)
    ab = 4.0 if precision == "fp32" else 2.0  # activations, kept and sent
    n_gpus = tp * cp * pp * dp
    m_exact = batch / (dp * b)
    m = int(m_exact) if m_exact >= 1 and m_exact == int(m_exact) else 0
    plan = dict(tp=tp, cp=cp, pp=pp, dp=dp, ep=ep, z=zero_stage, rc=recompute)
    plan["sp"] = sequence_parallel
    state = _state_bytes(precision)
    mem = _memory(model, shape, s, b, m, plan, state, ab / 2.0, formula)
    row = dict(tp=tp, pp=pp, dp=dp, zero_stage=zero_stage, recompute=recompute)
    row.update(sequence_parallel=sequence_parallel, cp=cp, ep=ep, precision=precision)
    row.update({f"{k}_bytes": v for k, v in mem.items()})
    row["memory_bytes"] = row.pop("total_bytes")
    row["fits"] = mem["total"] <= usable * mem_cap
    row["batch_ok"] = m >= 1
    row["microbatches"] = m
    nan = float("nan")
    if not m:
        for k in ("bubble", "tp_comm_bytes", "pp_comm_bytes", "dp_comm_bytes"):
            row[k] = nan
        row.update(cp_comm_bytes=nan, ep_comm_bytes=nan)
        row.update(step_s=nan, tokens_per_s=nan, mfu=nan)
        return row
    bubble = bubble_fraction(pp, m)
    layers = math.ceil(shape.n_layers / pp)
    tokens = batch * s
    per_token = flops_per_token(shape.n_params, shape.n_layers, shape.hidden, s)
    hw_per_token = per_token + _extra_flops_per_token(shape, s, recompute, formula)
    compute_s = hw_per_token * tokens / n_gpus / (peak * eff)
    net = as_link(inter_node_link)
    cell = dict(gpus_per_node=gpus_per_node, system=intra_node_system, net=net)
    cell["flops"] = peak * eff
    act_bytes = ab * (s // cp) * b * shape.hidden
    tp_count = (6 if recompute == "full" else 4) * layers * m
    tp_sent = 0.0 if tp == 1 else tp_count * act_bytes * 2 * (tp - 1) / tp
    one_tp_s = _tp_s(act_bytes, tp, gpus_per_node, intra_node_system, net)
    tp_s = tp_count * one_tp_s
    pp_msg = act_bytes / tp
    pp_sent = 0.0 if pp == 1 else 2 * m * pp_msg
    inside = tp * cp * pp <= gpus_per_node
    pp_bw = _busbw(pp_msg, intra_node_system) if inside else net.effective_Bps
    pp_s = pp_sent / pp_bw
    cp_sent = cp_s = 0.0
    if cp > 1:
        cp_one_b, cp_one_s = _cp_s(shape, s, b, plan, ab, cell)
        cp_sent, cp_s = cp_one_b * layers * m, cp_one_s * layers * m
    ep_sent = ep_s = 0.0
    if moe and ep > 1:
        moe_layers = math.ceil((model.n_layers - model.n_dense_layers) / pp)
        disp_b = min(ab, _precision.bytes_per_value(precision))
        one_b, one_s = _ep_s(model, s, b, plan, ab, disp_b, cell)
        ep_sent = one_b * moe_layers * m
        ep_s = one_s * moe_layers * m * (1.0 - hide_ep)
    # Data parallelism over dp * cp: dense gradients, and experts' over dp*cp/ep.
    other, experts = split_params(model)
    gb = state[1]
    factor = 1.5 if zero_stage == 3 else 1.0
    inside = n_gpus <= gpus_per_node
    dp_sent = dp_s = 0.0
    groups = ((other / (tp * pp), dp * cp), (experts / (pp * ep), dp * cp // ep))
    for params, group in groups:
        if params and group > 1:
            dp_sent += factor * gb * params * 2 * (group - 1) / group
            dp_s += factor * _dp_s(gb * params, group, inside, intra_node_system, net)
    hidden_by = compute_s * (1.0 if zero_stage == 3 else 2.0 / 3.0)
    work = compute_s + tp_s + pp_s + cp_s + ep_s
    step_s = work / (1.0 - bubble) + max(0.0, dp_s - hidden_by)
    row.update(bubble=bubble, tp_comm_bytes=tp_sent, pp_comm_bytes=pp_sent)
    row.update(dp_comm_bytes=dp_sent, compute_s=compute_s, tp_comm_s=tp_s)
    row.update(tp_allreduce_bytes=act_bytes, tp_allreduce_s=one_tp_s)
    row.update(pp_comm_s=pp_s, dp_comm_s=dp_s, cp_comm_bytes=cp_sent, cp_comm_s=cp_s)
    row.update(ep_comm_bytes=ep_sent, ep_comm_s=ep_s, step_s=step_s)
    row["tokens_per_s"] = tokens / step_s
    row["mfu"] = row["tokens_per_s"] * per_token / (n_gpus * peak)
    return row


def plan5d(
    model,
    n_gpus: int,
    *,
    global_batch: int,
    micro_batch: int = 1,
    tp_options=(1, 2, 4, 8),
    cp_options=(1,),
    ep_options=(1,),
    zero_stages=(0, 1, 2, 3),
    recompute_modes=RECOMPUTE_MODES,
    precisions=("bf16",),
    max_pp: int = 64,
    **kwargs,
) -> pd.DataFrame:
    """Every 5-D plan for ``n_gpus`` GPUs, feasible first, fastest first.

    Args:
        model: a ``ModelShape`` or ``MoEShape``.
        n_gpus: GPUs in the job, >= 1.
        global_batch, micro_batch: sequences per step and per micro-batch.
        tp_options, cp_options, ep_options: degrees to try (those that do not
            divide what they must are skipped; EP only for MoE models).
        zero_stages, recompute_modes, precisions: knobs to try.
        max_pp: largest pipeline degree to try (and at most the layers).
        **kwargs: passed to :func:`plan5d_row`.

    Returns:
        One row per plan (columns of :func:`plan5d_row`) and ``feasible``.
        With ``cp_options = ep_options = (1,)`` and bf16 these are the rows of
        ``cl.models.planner.plan``.
    """
    n_gpus = check_int("n_gpus", n_gpus, 1)
    check_int("global_batch", global_batch, 1)
    max_pp = check_int("max_pp", max_pp, 1)
    shape = dense_shape(model)
    moe = isinstance(model, MoEShape)
    link = kwargs.get("inter_node_link", LINKS[DEFAULT_INTER_NODE_LINK])
    kwargs["inter_node_link"] = as_link(link)
    if kwargs.get("matmul_efficiency") is None:
        kwargs["matmul_efficiency"] = matmul_efficiency_of()
    s = kwargs.get("seq_len") or shape.seq_len
    tp_options = [check_int("tp", v, 1) for v in tp_options]
    cp_options = [check_int("cp", v, 1) for v in cp_options]
    ep_options = [check_int("ep", v, 1) for v in ep_options]
    knobs = list(itertools.product(recompute_modes, precisions))
    rows = []
    for tp, cp in itertools.product(tp_options, cp_options):
        if n_gpus % (tp * cp) or shape.n_heads % tp or s % cp:
            continue
        for pp in _divisors(n_gpus // (tp * cp)):
            dp = n_gpus // (tp * cp * pp)
            if pp > min(max_pp, shape.n_layers):
                continue
            for ep in ep_options if moe else (1,):
                if (dp * cp) % ep or (moe and model.n_experts % ep):
                    continue
                zeros = zero_stages if dp * cp > 1 else (0,)
                for zero, (rc, prec) in itertools.product(zeros, knobs):
                    for sp in (False, True) if tp > 1 else (False,):
                        plan = dict(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, zero_stage=zero)
                        plan.update(recompute=rc, sequence_parallel=sp, precision=prec)
                        rows.append(
                            plan5d_row(
                                model,
                                global_batch=global_batch,
                                micro_batch=micro_batch,
                                **plan,
                                **kwargs,
                            )
                        )
    if not rows:
        raise ValueError(
            f"n_gpus={n_gpus}: no plan with tp_options={tuple(tp_options)}, "
            f"cp_options={tuple(cp_options)}, ep_options={tuple(ep_options)} "
            f"divides it, the {shape.n_heads} heads and the sequence"
        )
    df = pd.DataFrame(rows)
    df["feasible"] = df["fits"] & df["batch_ok"]
    df["tokens_per_s"] = df["tokens_per_s"].astype(float)
    order = np.lexsort((-df["tokens_per_s"].fillna(-1).to_numpy(), ~df["feasible"]))
    return df.iloc[order].reset_index(drop=True)
