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
  bytes), **exposed** by default (``tp_overlap=0``: plain Megatron-LM layers
  wait for each; Transformer Engine's ``tp_comm_overlap`` and collective
  matmuls hide a share under the GEMMs). Inside a node an all-reduce takes the
  published all-reduce bus bandwidth at its own message size
  (:func:`~clusterlab.models.collectives.bus_bandwidth`, default system the
  generation-matched ``"8xH200-NVLS-nccl2.27.7"``; the Scaling Book's
  ``"8xH100-scalingbook"`` is a pessimistic bound), and sequence
  parallelism's pair takes the ring's curve (``planner_comm.SP_RING``,
  NVLS does not shorten it); across nodes, a ring at the network link's rate;
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

import pandas as pd

from clusterlab.models.activations import RECOMPUTE_MODES
from clusterlab.models.compute import H100_SXM, ModelShape
from clusterlab.models.memory import USABLE_MEMORY_FRACTION
from clusterlab.models.planner5d import plan5d, plan5d_row
from clusterlab.models.planner_comm import (
    DEFAULT_INTER_NODE_LINK,
    DEFAULT_INTRA_NODE_SYSTEM,
)
from clusterlab.models.recipes import Recipe

#: Columns of the 5-D planner that a 3-D plan does not have.
_ONLY_5D = (
    "cp", "ep", "precision", "expert_state_bytes", "cp_comm_bytes", "cp_comm_s",
    "ep_comm_bytes", "ep_comm_s", "second_copy_bytes",
)  # fmt: skip


def _three_d(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in _ONLY_5D}


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
    usable_fraction: float = USABLE_MEMORY_FRACTION,
    gpus_per_node: int = 8,
    intra_node_system: str = DEFAULT_INTRA_NODE_SYSTEM,
    inter_node_link=DEFAULT_INTER_NODE_LINK,
    matmul_efficiency: float | None = None,
    formula: str = "flash",
    nvlink_domain: int = 8,
    tp_overlap: float = 0.0,
) -> dict:
    """Memory, bubble, communication and speed of one plan (see the module).

    The 3-D plan is the 5-D one (:func:`~clusterlab.models.planner5d.plan5d_row`)
    with no context or expert parallelism, in bf16: one computation, not two.

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
        gpus_per_node: GPUs per server; with the default ``nvlink_domain``
            these are the GPUs joined by NVLink.
        intra_node_system: published all-reduce sweep inside a node.
        inter_node_link: network link between nodes (``LINKS`` name or Link).
        matmul_efficiency: share of peak the matmuls reach (None: the H100's
            from ``data/matmul_achieved.csv``).
        formula: activation formula, "flash" (default) or "korthikanti".
        nvlink_domain: 8 (NVLink ends at the server) or 72 (a GB200 or GB300
            NVL72 rack): a TP group of up to this many GPUs stays on NVLink.
        tp_overlap: share of the tensor-parallel collectives hidden under the
            GEMMs, in [0, 1] (0: all exposed, as in plain Megatron-LM).

    Returns:
        dict of plan, memory (bytes, the keys of ``MEMORY_KEYS`` + ``_bytes``,
        ``memory_bytes`` the peak), ``fits``, micro-batches, bubble, bytes
        sent per GPU per step, seconds per step, ``tokens_per_s``, ``mfu``.
    """
    memory = H100_SXM.memory_bytes if gpu_memory_bytes is None else gpu_memory_bytes
    peak = H100_SXM.peak_flops if peak_flops is None else peak_flops
    row = plan5d_row(
        model, tp=tp, pp=pp, dp=dp, cp=1, ep=1, zero_stage=zero_stage,
        recompute=recompute, sequence_parallel=sequence_parallel,
        global_batch=global_batch, micro_batch=micro_batch, precision="bf16",
        seq_len=seq_len,
        gpu_memory_bytes=memory, peak_flops=peak,
        usable_fraction=usable_fraction, gpus_per_node=gpus_per_node,
        intra_node_system=intra_node_system, inter_node_link=inter_node_link,
        matmul_efficiency=matmul_efficiency, formula=formula,
        nvlink_domain=nvlink_domain, tp_overlap=tp_overlap,
    )  # fmt: skip
    return _three_d(row)


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
    kwargs.setdefault("gpu_memory_bytes", H100_SXM.memory_bytes)
    kwargs.setdefault("peak_flops", H100_SXM.peak_flops)
    df = plan5d(
        model, n_gpus, global_batch=global_batch, micro_batch=micro_batch,
        tp_options=tp_options, zero_stages=zero_stages,
        recompute_modes=recompute_modes, max_pp=max_pp, **kwargs,
    )  # fmt: skip
    return df.drop(columns=[c for c in _ONLY_5D if c in df.columns])


__all__ = ["plan", "plan_row", "recipe_row"]
