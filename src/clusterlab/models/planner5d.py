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
  (``cl.models.precision.peak_flops``) at its measured achieved share; in
  fp8 only the linear layers' GEMMs (6N per token, 2N more under full
  recomputation) run in fp8, at the measured fp8 MAMF (1453 of 1979 TFLOP/s
  on an H200), and attention's products stay in bf16, as fp8 training
  recipes keep them; activations are kept and sent in 16 bits (4 bytes in fp32); the MoE
  dispatch is sent in the precision itself (fp8 dispatch, 16-bit combine, as
  DeepSeek-V3 does); model state is 2 + 2 + 12 bytes per parameter (4 + 4 + 8
  in fp32).

Like the 3-D planner it is an upper-bound estimate that says which plans are
worth trying, not what a run will measure.

Mixture-of-experts models and published layouts for the 5-D planner.

A :class:`MoEShape` is what the planner needs to know of a MoE transformer:
its dense part (attention, shared experts, embeddings, the first dense
layers) is split like a dense model's, by ``tp * pp``; its routed experts by
``pp * ep``. Arithmetic and activations follow the *active* parameters: each
token meets ``top_k`` routed and the shared experts, so the planner reads the
model as a dense one of ``params_active`` parameters whose MLP is
``(top_k + n_shared_experts) * expert_ffn_hidden`` wide
(:func:`dense_shape`).

:func:`moe_shape` builds one from ``data/moe_configs.csv`` (the architecture)
and ``data/parallel_layouts_published.csv`` (the heads, vocabulary and
sequence the run used); :func:`published_layout` reads a layout row, and
:func:`layout_check` asks of the planner the two questions a published layout
answers: does it fit, and does it need its expert parallelism to fit?

The 5-D planner's extra terms: memory re-split for MoE, ring attention, all-to-all.

Helpers of :mod:`~clusterlab.models.planner5d` (read its docstring for the
model). ``plan`` dicts carry ``tp, cp, pp, dp, ep`` (degrees), ``z`` (ZeRO
stage), ``rc`` (recomputation) and ``sp`` (sequence parallelism); ``cell``
carries the node size, the published intra-node system, the network link and
the achieved FLOP/s.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from clusterlab.core import published
from clusterlab.core.validate import check_choice, check_float, check_int
from clusterlab.models import precision as _precision
from clusterlab.models.activations import RECOMPUTE_MODES
from clusterlab.models.collectives import scale_up_size
from clusterlab.models.compute import ModelShape, flops_per_token
from clusterlab.models.context_parallel import (
    cp_kv_bytes_backward_per_rank,
    cp_kv_bytes_per_rank,
)
from clusterlab.models.links import LINKS, as_link
from clusterlab.models.memory import (
    USABLE_MEMORY_FRACTION,
    model_memory,
    model_state_bytes_per_param,
)
from clusterlab.models.moe import alltoall_bytes_per_rank, ep_layer_alltoall_s
from clusterlab.models.pipeline import bubble_fraction
from clusterlab.models.planner_comm import (
    DEFAULT_INTER_NODE_LINK,
    DEFAULT_INTRA_NODE_SYSTEM,
    _busbw,
    _dp_s,
    _tp_s,
    matmul_efficiency_of,
)


@dataclass(frozen=True)
class MoEShape:
    """A MoE transformer's size and shape (lengths in tokens).

    Attributes:
        name: label for tables.
        params_total, params_active: parameters in all, and met by one token.
        n_layers, hidden, n_heads, n_kv_heads, vocab, seq_len: as in
            ``ModelShape`` (keys and values as wide as the queries for MLA).
        n_dense_layers: leading layers with a dense MLP instead of experts.
        n_experts, top_k, n_shared_experts, expert_ffn_hidden: the MoE layer.
        max_nodes_per_token: node-limited routing's M (DeepSeek-V3: 4), or
            None; the all-to-all then crosses the network once per remote
            node (``cl.models.moe.ep_layer_alltoall_s``).
    """

    name: str
    params_total: float
    params_active: float
    n_layers: int
    hidden: int
    n_heads: int
    n_kv_heads: int
    vocab: int
    seq_len: int
    n_dense_layers: int
    n_experts: int
    top_k: int
    n_shared_experts: int
    expert_ffn_hidden: int
    max_nodes_per_token: int | None = None

    @property
    def expert_params(self) -> float:
        """Parameters of the routed experts: layers x experts x 3 h f (SwiGLU)."""
        per_expert = 3.0 * self.hidden * self.expert_ffn_hidden
        return (self.n_layers - self.n_dense_layers) * self.n_experts * per_expert


def dense_shape(model) -> ModelShape:
    """The dense model the planner computes with (the active one for MoE)."""
    if isinstance(model, ModelShape):
        return model
    if not isinstance(model, MoEShape):
        raise ValueError(f"model={model!r} must be a ModelShape or a MoEShape")
    width = (model.top_k + model.n_shared_experts) * model.expert_ffn_hidden
    return ModelShape(
        model.name, model.params_active, model.n_layers, model.hidden,
        model.n_heads, model.n_kv_heads, width, model.vocab, model.seq_len,
        "swiglu",
    )  # fmt: skip


def split_params(model) -> tuple[float, float]:
    """(parameters split by ``tp * pp``, routed-expert parameters by ``pp * ep``)."""
    if isinstance(model, MoEShape):
        return model.params_total - model.expert_params, model.expert_params
    return dense_shape(model).n_params, 0.0


def published_layout(layout: str) -> pd.Series:
    """One row of ``data/parallel_layouts_published.csv`` (a layout and its run).

    Args:
        layout: the row's ``layout``, e.g. "DeepSeek-V3 pre-training".

    Returns:
        The row: model, GPUs, the five degrees, ZeRO stage, recomputation,
        precision, sequence and batch, the reported GPU-hours, provenance.
    """
    return published.row("parallel_layouts_published", layout=layout)


def moe_shape(layout_name: str = "DeepSeek-V3 pre-training") -> MoEShape:
    """The MoE model of a published layout, from the two tables.

    Args:
        layout_name: a ``layout`` of ``data/parallel_layouts_published.csv``
            whose ``model`` is a ``model`` of ``data/moe_configs.csv``.

    Returns:
        The model's :class:`MoEShape`.
    """
    run = published_layout(layout_name)
    arch = published.row("moe_configs", model=run["model"])
    return MoEShape(
        name=str(run["model"]),
        params_total=float(arch["params_total"]),
        params_active=float(arch["params_active"]),
        n_layers=int(arch["n_layers"]),
        hidden=int(arch["hidden"]),
        n_heads=int(run["n_heads"]),
        n_kv_heads=int(run["n_heads"]),
        vocab=int(run["vocab"]),
        seq_len=int(run["seq_len"]),
        n_dense_layers=int(arch["n_layers"] - arch["n_moe_layers"]),
        n_experts=int(arch["n_experts"]),
        top_k=int(arch["top_k"]),
        n_shared_experts=int(arch["n_shared_experts"]),
        expert_ffn_hidden=int(arch["expert_ffn_hidden"]),
        max_nodes_per_token=(
            int(arch["max_nodes_per_token"])
            if pd.notna(arch["max_nodes_per_token"])
            else None
        ),
    )


def layout_plan(layout: pd.Series) -> dict:
    """The ``plan5d_row`` arguments a layout row states."""
    keys = ("tp", "pp", "dp", "cp", "ep", "zero_stage", "micro_batch")
    plan = {k: int(layout[k]) for k in keys}
    plan.update(recompute=str(layout["recompute"]), precision=str(layout["precision"]))
    plan.update(global_batch=int(layout["global_batch"]), sequence_parallel=False)
    plan.update(gpus_per_node=int(layout["gpus_per_node"]))
    plan["gpu"] = str(layout["planner_gpu"])
    link = layout.get("scale_up_link")
    if isinstance(link, str) and link:
        plan["scale_up_link"] = link
    return plan


#: How far the planner's computation-to-communication ratio may sit from a
#: published one ("about 1:1") and still agree: a factor of two either way.
RATIO_FACTOR = 2.0


def layout_check(model, layout: pd.Series, **kwargs) -> pd.DataFrame:
    """What the planner says of a published layout, question by question.

    Statements, each a row with ``holds``: the layout fits in the GPU's
    usable memory; without its expert parallelism (``ep = 1``, the same other
    degrees) it would not; it uses every GPU (``tp*cp*pp*dp = n_gpus``);
    where the layout reports GPU-hours, the throughput they imply is at most
    the planner's upper bound, its estimate with every all-to-all hidden
    (``ep_overlap = 1``); and where it reports a computation-to-communication
    ratio, the planner's (compute seconds over all-to-all seconds, nothing
    hidden) is within :data:`RATIO_FACTOR` of it. ``attrs`` hold the
    figures, with the estimate with every all-to-all exposed beside them. A
    wrong model (experts not split by ``ep``, the wrong expert count, a far
    too slow speed model, an all-to-all that ignores node-limited routing)
    makes one of them fail.

    Args:
        model: the model (a :class:`MoEShape`).
        layout: a row of :func:`published_layout`.
        **kwargs: more ``plan5d_row`` arguments (links, ``ep_overlap``...).

    Returns:
        Columns ``statement, holds, memory_GB, usable_GB``.
    """
    plan = layout_plan(layout) | kwargs
    row = plan5d_row(model, **plan)
    no_ep = plan5d_row(model, **(plan | {"ep": 1}))
    hbm = published.value("gpu_specs", "hbm_bytes", part=plan["gpu"])
    usable = USABLE_MEMORY_FRACTION * hbm
    n = plan["tp"] * plan["cp"] * plan["pp"] * plan["dp"]
    nan = float("nan")
    rows = [
        ("the published layout fits", bool(row["fits"]), row["memory_bytes"]),
        ("without EP it would not fit", not no_ep["fits"], no_ep["memory_bytes"]),
        (f"it uses all {int(layout['n_gpus'])} GPUs", n == layout["n_gpus"], nan),
    ]
    df = pd.DataFrame(rows, columns=["statement", "holds", "memory_bytes"])
    df["memory_GB"] = df.pop("memory_bytes") / 1e9
    df["usable_GB"] = usable / 1e9
    hours = layout.get("gpu_hours_per_trillion_tokens")
    if hours is not None and hours == hours:
        reported = reported_tokens_per_s(layout)
        low = plan5d_row(model, **(plan | {"ep_overlap": 0.0}))["tokens_per_s"]
        high = plan5d_row(model, **(plan | {"ep_overlap": 1.0}))["tokens_per_s"]
        text = "the reported tokens/s is at most the planner's, all-to-alls hidden"
        df.loc[len(df)] = [text, bool(reported <= high), nan, nan]
        df.attrs.update(reported_tokens_per_s=reported, exposed_tokens_per_s=low)
        df.attrs["hidden_tokens_per_s"] = high
    ratio = layout.get("compute_to_comm_ratio")
    if ratio is not None and ratio == ratio and row["ep_comm_s"] > 0:
        exposed = plan5d_row(model, **(plan | {"ep_overlap": 0.0}))
        ours = exposed["compute_s"] / exposed["ep_comm_s"]
        agree = 1 / RATIO_FACTOR <= ours / float(ratio) <= RATIO_FACTOR
        text = f"compute : all-to-all is the report's {float(ratio):g}:1 within 2x"
        df.loc[len(df)] = [text, bool(agree), nan, nan]
        df.attrs.update(compute_to_comm=ours, published_compute_to_comm=float(ratio))
        df.attrs.update(compute_s=exposed["compute_s"], ep_comm_s=exposed["ep_comm_s"])
    return df


def reported_tokens_per_s(layout: pd.Series) -> float:
    """Tokens/s of the whole job implied by the reported GPU-hours per 1e12 tokens.

    Args:
        layout: a row of :func:`published_layout`.

    Returns:
        ``1e12 / (gpu_hours_per_trillion_tokens * 3600) * n_gpus``.
    """
    per_gpu_s = float(layout["gpu_hours_per_trillion_tokens"]) * 3600.0 / 1e12
    return float(layout["n_gpus"]) / per_gpu_s


_NVLINK = "NVLink 4"


@functools.lru_cache(maxsize=64)
def _gpu_figures(gpu, precision):
    """(memory bytes, peak FLOP/s) of a GPU in a precision, read once."""
    memory = published.value("gpu_specs", "hbm_bytes", part=gpu)
    return float(memory), float(_precision.peak_flops(gpu, precision))


def _state_bytes(precision):
    return (4.0, 4.0, 8.0) if precision == "fp32" else (2.0, 2.0, 12.0)


def _memory(model, shape, s, b, m, plan, state, act_scale, formula):
    """Peak bytes per GPU: the dense model's memory, state re-split for MoE."""
    tp, cp, pp, dp, ep, zero = (plan[k] for k in ("tp", "cp", "pp", "dp", "ep", "z"))
    wb, gb, ob = state
    mem = model_memory(
        shape, seq_len=s // cp, tp=tp, pp=pp, dp=dp * cp, zero_stage=zero,
        micro_batch=b, sequence_parallel=plan["sp"], recompute=plan["rc"],
        formula=formula, microbatches=max(m, 1), weight_bytes=wb, grad_bytes=gb,
        optimizer_bytes=ob,
    )  # fmt: skip
    for key in ("activations", "last_stage_activations", "recompute_buffer"):
        mem[key] *= act_scale
    other, experts = split_params(model)
    kw = dict(weight_bytes=wb, grad_bytes=gb, optimizer_bytes=ob)
    expert_pp = model_state_bytes_per_param(zero, dp * cp // ep, **kw) if experts else 0
    mem["weights"] = other / (tp * pp) * wb / (dp * cp if zero >= 3 else 1)
    mem["grads"] = other / (tp * pp) * gb / (dp * cp if zero >= 2 else 1)
    mem["optimizer"] = other / (tp * pp) * ob / (dp * cp if zero >= 1 else 1)
    mem["expert_state"] = experts / (pp * ep) * expert_pp
    # DualPipe's second copy of the weights a GPU holds (its shard under ZeRO-3).
    held = mem["weights"] + experts / (pp * ep) * wb / (
        dp * cp // ep if zero >= 3 else 1
    )
    mem["second_copy"] = (plan.get("copies", 1) - 1) * held
    if experts and zero == 3 and dp * cp > 1:  # ZeRO-3 gathers the local experts
        one = 3.0 * model.hidden * model.expert_ffn_hidden
        local = model.n_experts / ep * one - model.top_k * one / tp
        mem["gathered_weights"] += 2 * local * wb
        mem["gathered_grads"] += local * gb
    common = mem["weights"] + mem["grads"] + mem["optimizer"] + mem["expert_state"]
    common += mem["second_copy"] + mem["gathered_weights"] + mem["gathered_grads"]
    common += mem["recompute_buffer"]
    last = mem["last_stage_activations"] + mem["logits"]
    if pp == 1:
        mem["total"] = common + mem["activations"] + mem["logits"]
    else:
        mem["total"] = common + max(mem["activations"], last)
    return mem


def _cp_s(shape, s, b, plan, ab, cell):
    """Bytes sent and exposed seconds of ring attention, per layer-micro-batch."""
    tp, cp = plan["tp"], plan["cp"]
    if cp == 1:
        return 0.0, 0.0
    kv_hidden = shape.hidden * shape.n_kv_heads // shape.n_heads
    fwd = cp_kv_bytes_per_rank(s, kv_hidden, cp, ab) * b / tp
    sent = fwd * (2 if plan["rc"] == "full" else 1)
    sent += cp_kv_bytes_backward_per_rank(s, kv_hidden, cp, ab) * b / tp
    net = cell["net"]
    if tp * cp <= cell["domain"]:
        send_s = sent / _busbw(fwd, cell["system"])
    else:
        send_s = sent / net.effective_Bps + 3 * (cp - 1) * net.alpha_s
    # The passes overlap the layer's attention arithmetic: 12 h s per token.
    attn_s = 12.0 * shape.hidden * s * (b * s / cp) / tp / cell["flops"]
    return sent, max(0.0, send_s - attn_s)


def _ep_s(model, s, b, plan, ab, dispatch_b, cell):
    """Bytes sent and seconds of the MoE all-to-alls, per MoE layer-micro-batch."""
    tp, cp, ep = plan["tp"], plan["cp"], plan["ep"]
    if ep == 1:
        return 0.0, 0.0
    tokens = max(1, (b * s) // (cp * tp))
    per_node = max(1, cell["domain"] // (tp * cp))
    args = (tokens, model.hidden, model.top_k, ep)
    limit = getattr(model, "max_nodes_per_token", None)
    where = dict(ranks_per_domain=per_node, nvlink=cell.get("nvlink", _NVLINK),
                 network=cell["net"], max_nodes_per_token=limit)  # fmt: skip
    fwd = ep_layer_alltoall_s(*args, dispatch_b, **where)["layer_s"] / 2
    fwd += ep_layer_alltoall_s(*args, ab, **where)["layer_s"] / 2
    bwd = ep_layer_alltoall_s(*args, ab, **where)["layer_s"]
    sent = alltoall_bytes_per_rank(*args, dispatch_b) + 3 * alltoall_bytes_per_rank(
        *args, ab
    )
    if plan["rc"] == "full":
        return sent * 1.5, 2 * fwd + bwd
    return sent, fwd + bwd


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


#: the part whose measured fp8 GEMM efficiency the planner uses (an H200: the
#: H100 SXM5's compute, at the same 1979 TFLOP/s fp8 peak)
FP8_EFFICIENCY_PART = "H200 SXM"


def _fp8_efficiency() -> float:
    return matmul_efficiency_of(FP8_EFFICIENCY_PART, "fp8")


def _gemm_flops_per_token(model, recompute):
    """The linear layers' share of the FLOPs per token: 6N, and 2N more for a
    full recomputation's second forward pass (attention's products are the rest)."""
    return 6.0 * model.n_params + (2.0 * model.n_params if recompute == "full" else 0.0)


def placement(
    tp: int, cp: int = 1, ep: int = 1, *, nvlink_domain: int = 8,
    gpus_per_node: int = 8,
) -> dict:  # fmt: skip
    """Where each parallel group of a plan runs: on NVLink or over the network.

    Ranks are placed TP innermost, then CP, then EP (Megatron-Core's order), so
    a TP group spans ``tp`` neighbouring GPUs, a CP group's ring ``tp * cp``
    and an EP group ``tp * cp * ep``; a group whose span fits in the NVLink
    domain stays on NVLink. An EP group that does not fit sends part of its
    all-to-all over NVLink (the peers in its domain) and the rest over the
    network, as :func:`plan5d_row` counts it.

    Args:
        tp, cp, ep: the degrees, >= 1.
        nvlink_domain, gpus_per_node: as in :func:`plan5d_row`.

    Returns:
        ``{"tp": ..., "cp": ..., "ep": ...}``, each "none" (degree 1),
        "NVLink", "network" or, for EP only, "NVLink + network".
    """
    tp, cp, ep = (check_int(k, v, 1) for k, v in (("tp", tp), ("cp", cp), ("ep", ep)))
    domain = scale_up_size(nvlink_domain, gpus_per_node)

    def where(degree, span):
        return "none" if degree == 1 else "NVLink" if span <= domain else "network"

    out = {"tp": where(tp, tp), "cp": where(cp, tp * cp), "ep": where(ep, tp * cp * ep)}
    if out["ep"] == "network" and domain // (tp * cp) > 1:
        out["ep"] = "NVLink + network"
    return out


def domain_comparison(model, plan: dict, nvlink_domains=(8, 72)) -> pd.DataFrame:
    """One plan in NVLink domains of different sizes, with the same figures.

    Args:
        model: a ``ModelShape`` or :class:`MoEShape`.
        plan: :func:`plan5d_row` arguments (e.g. :func:`layout_plan`'s).
        nvlink_domains: sizes from ``cl.models.collectives.NVLINK_DOMAINS``.

    Returns:
        One row per domain: ``nvlink_domain``, where TP, CP and EP run
        (``tp_on, cp_on, ep_on``, see :func:`placement`), ``tp_comm_s``,
        ``cp_comm_s``, ``ep_comm_s``, ``step_s`` and ``tokens_per_s``.
    """
    rows = []
    for d in nvlink_domains:
        r = plan5d_row(model, **(plan | {"nvlink_domain": d}))
        g = plan.get("gpus_per_node", 8)
        on = placement(r["tp"], r["cp"], r["ep"], nvlink_domain=d, gpus_per_node=g)
        row = {"nvlink_domain": d} | {f"{k}_on": v for k, v in on.items()}
        keys = ("tp_comm_s", "cp_comm_s", "ep_comm_s", "step_s", "tokens_per_s")
        rows.append(row | {k: float(r[k]) for k in keys})
    return pd.DataFrame(rows)


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
    usable_fraction: float = USABLE_MEMORY_FRACTION,
    gpus_per_node: int = 8,
    intra_node_system: str = DEFAULT_INTRA_NODE_SYSTEM,
    inter_node_link=DEFAULT_INTER_NODE_LINK,
    matmul_efficiency: float | None = None,
    ep_overlap: float = 0.0,
    formula: str = "flash",
    nvlink_domain: int = 8,
    fp8_matmul_efficiency: float | None = None,
    tp_overlap: float = 0.0,
    state_bytes: tuple[float, float, float] | None = None,
    weight_copies: int = 1,
    scale_up_link: str = _NVLINK,
    other_compute_s: float = 0.0,
) -> dict:
    """Memory, bubble, communication and speed of one 5-D plan (see the module).

    Args:
        model: a dense ``ModelShape`` or a ``cl.models.planner5d.MoEShape``.
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
        tp_overlap: share of the tensor-parallel collectives hidden under the
            GEMMs beside them, [0, 1]: 0 in plain Megatron-LM layers (the
            default), more with Transformer Engine's ``tp_comm_overlap`` or a
            collective matmul; hidden time is at most the compute.
        state_bytes: bytes per parameter of (weights, gradients, optimizer
            state), None for the precision's default (2, 2, 12; 4, 4, 8 in
            fp32). ZeRO shards the optimizer state from stage 1, the gradients
            from 2 and the weights from 3. ``cl.models.memory_margins`` names
            published choices (Megatron's fp32 main gradients, DeepSeek-V3's
            fp32 gradients and bf16 moments).
        weight_copies: copies of the weights each GPU holds, in [1, 2]: 2 for
            DualPipe, which keeps a second copy (``second_copy_bytes``).
        scale_up_link: the ``cl.models.links.LINKS`` link an expert
            all-to-all uses inside the NVLink domain ("NVLink 4"; "H800
            NVLink", 160 GB/s, for DeepSeek-V3's H800s).
        fp8_matmul_efficiency: in fp8, the achieved share of the fp8 peak that
            the linear layers' GEMMs run at (None: ``FP8_EFFICIENCY_PART``'s
            measured MAMF, 0.73); attention's products stay in bf16 at
            ``matmul_efficiency`` of the bf16 peak, as fp8 recipes keep them.
        nvlink_domain: GPUs one NVLink domain joins: 8 (the server, the
            default) or 72 (a GB200 or GB300 NVL72 rack; ``gpus_per_node``
            divides it). A TP, CP, EP or PP group, or the whole job, that
            fits in it runs on NVLink (``intra_node_system``'s bus bandwidth);
            a larger one crosses ``inter_node_link`` (:func:`placement`).
        other_compute_s: seconds per step and GPU of work the FLOP count
            leaves out (norms, element-wise ops, casts, the optimizer), >= 0;
            added to ``compute_s`` in every precision, since fp8 does not
            shorten it (0, the default: the planner's upper bound).
            ``cl.models.fp8_gain`` sizes it from a measured bf16 step.

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
    hide_tp = check_float("tp_overlap", tp_overlap, 0.0, 1.0)
    other_s = check_float("other_compute_s", other_compute_s, 0.0)
    domain = scale_up_size(nvlink_domain, gpus_per_node)
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
    if state_bytes is None:
        state = _state_bytes(precision)
    else:
        if len(state_bytes) != 3:
            raise ValueError(
                f"state_bytes={state_bytes!r} must be (weights, gradients, optimizer) "
                "bytes per parameter"
            )
        state = tuple(
            check_float(f"state_bytes[{i}]", v, 0.0, 64.0)
            for i, v in enumerate(state_bytes)
        )
    plan["copies"] = check_int("weight_copies", weight_copies, 1, 2)
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
    net = as_link(inter_node_link)
    if scale_up_link not in LINKS:
        raise ValueError(
            f"scale_up_link={scale_up_link!r}: choose a link of cl.models.links.LINKS "
            f"({sorted(k for k, v in LINKS.items() if v.per_gpu)})"
        )
    cell = dict(domain=domain, system=intra_node_system, net=net, nvlink=scale_up_link)
    if precision == "fp8":  # the linear layers' GEMMs in fp8, attention in bf16
        eff8 = _fp8_efficiency() if fp8_matmul_efficiency is None else (
            check_float("fp8_matmul_efficiency", fp8_matmul_efficiency, 0.0, 1.0,
                        low_inclusive=False)
        )  # fmt: skip
        gemm = _gemm_flops_per_token(shape, recompute)
        bf16_rate = _gpu_figures(gpu, "bf16")[1] * eff
        compute_s = (
            tokens / n_gpus * (gemm / (peak * eff8) + (hw_per_token - gemm) / bf16_rate)
        )
        cell["flops"] = bf16_rate
    else:
        compute_s = hw_per_token * tokens / n_gpus / (peak * eff)
        cell["flops"] = peak * eff
    compute_s += other_s
    act_bytes = ab * (s // cp) * b * shape.hidden
    tp_count = (6 if recompute == "full" else 4) * layers * m
    tp_sent = 0.0 if tp == 1 else tp_count * act_bytes * 2 * (tp - 1) / tp
    one_tp_s = _tp_s(
        act_bytes, tp, gpus_per_node, intra_node_system, net, nvlink_domain,
        bool(sequence_parallel),
    )  # fmt: skip
    tp_total_s = tp_count * one_tp_s
    tp_s = tp_total_s - min(hide_tp * tp_total_s, compute_s)  # exposed
    pp_msg = act_bytes / tp
    pp_sent = 0.0 if pp == 1 else 2 * m * pp_msg
    inside = tp * cp * pp <= domain
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
    inside = n_gpus <= domain
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
    row.update(tp_comm_total_s=tp_total_s)
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


__all__ = [
    "RATIO_FACTOR",
    "MoEShape",
    "dense_shape",
    "domain_comparison",
    "layout_check",
    "layout_plan",
    "moe_shape",
    "placement",
    "plan5d",
    "plan5d_row",
    "published_layout",
    "reported_tokens_per_s",
    "split_params",
]
