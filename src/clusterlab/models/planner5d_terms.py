"""The 5-D planner's extra terms: memory re-split for MoE, ring attention, all-to-all.

Helpers of :mod:`~clusterlab.models.planner5d` (read its docstring for the
model). ``plan`` dicts carry ``tp, cp, pp, dp, ep`` (degrees), ``z`` (ZeRO
stage), ``rc`` (recomputation) and ``sp`` (sequence parallelism); ``cell``
carries the node size, the published intra-node system, the network link and
the achieved FLOP/s.
"""

from __future__ import annotations

import functools

from .. import published
from . import precision as _precision
from .context_parallel import cp_kv_bytes_backward_per_rank, cp_kv_bytes_per_rank
from .memory import model_memory, model_state_bytes_per_param
from .moe import alltoall_bytes_per_rank, ep_layer_alltoall_s
from .planner_comm import _busbw
from .planner_moe import split_params

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
    if experts and zero == 3 and dp * cp > 1:  # ZeRO-3 gathers the local experts
        one = 3.0 * model.hidden * model.expert_ffn_hidden
        local = model.n_experts / ep * one - model.top_k * one / tp
        mem["gathered_weights"] += 2 * local * wb
        mem["gathered_grads"] += local * gb
    common = mem["weights"] + mem["grads"] + mem["optimizer"] + mem["expert_state"]
    common += mem["gathered_weights"] + mem["gathered_grads"]
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
    if tp * cp <= cell["gpus_per_node"]:
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
    per_node = max(1, cell["gpus_per_node"] // (tp * cp))
    args = (tokens, model.hidden, model.top_k, ep)
    where = dict(ranks_per_domain=per_node, nvlink=_NVLINK, network=cell["net"])
    fwd = ep_layer_alltoall_s(*args, dispatch_b, **where)["layer_s"] / 2
    fwd += ep_layer_alltoall_s(*args, ab, **where)["layer_s"] / 2
    bwd = ep_layer_alltoall_s(*args, ab, **where)["layer_s"]
    sent = alltoall_bytes_per_rank(*args, dispatch_b) + 3 * alltoall_bytes_per_rank(
        *args, ab
    )
    if plan["rc"] == "full":
        return sent * 1.5, 2 * fwd + bwd
    return sent, fwd + bwd
