"""Mixture-of-experts models and published layouts for the 5-D planner.

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
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .. import published
from .compute import ModelShape

__all__ = [
    "MoEShape",
    "dense_shape",
    "layout_check",
    "layout_plan",
    "moe_shape",
    "published_layout",
    "reported_tokens_per_s",
    "split_params",
]


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
    )


def layout_plan(layout: pd.Series) -> dict:
    """The ``plan5d_row`` arguments a layout row states."""
    keys = ("tp", "pp", "dp", "cp", "ep", "zero_stage", "micro_batch")
    plan = {k: int(layout[k]) for k in keys}
    plan.update(recompute=str(layout["recompute"]), precision=str(layout["precision"]))
    plan.update(global_batch=int(layout["global_batch"]), sequence_parallel=False)
    plan.update(gpus_per_node=int(layout["gpus_per_node"]))
    plan["gpu"] = str(layout["planner_gpu"])
    return plan


def layout_check(model, layout: pd.Series, **kwargs) -> pd.DataFrame:
    """What the planner says of a published layout, question by question.

    Statements, each a row with ``holds``: the layout fits in the GPU's
    usable memory; without its expert parallelism (``ep = 1``, the same other
    degrees) it would not; it uses every GPU (``tp*cp*pp*dp = n_gpus``); and,
    where the layout reports GPU-hours, the throughput they imply lies
    between the planner's estimate with the all-to-alls exposed
    (``ep_overlap = 0``) and hidden (``ep_overlap = 1``), which ``attrs``
    also hold. A wrong model (experts not split by ``ep``, the wrong expert
    count, a wrong speed) makes one of them fail.

    Args:
        model: the model (a :class:`MoEShape`).
        layout: a row of :func:`published_layout`.
        **kwargs: more ``plan5d_row`` arguments (links, ``ep_overlap``...).

    Returns:
        Columns ``statement, holds, memory_GB, usable_GB``.
    """
    from .planner5d import plan5d_row

    plan = layout_plan(layout) | kwargs
    row = plan5d_row(model, **plan)
    no_ep = plan5d_row(model, **(plan | {"ep": 1}))
    usable = 0.9 * published.value("gpu_specs", "hbm_bytes", part=plan["gpu"])
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
        text = "the reported tokens/s lies between all-to-all exposed and hidden"
        df.loc[len(df)] = [text, bool(low <= reported <= high), nan, nan]
        df.attrs.update(reported_tokens_per_s=reported, exposed_tokens_per_s=low)
        df.attrs["hidden_tokens_per_s"] = high
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
