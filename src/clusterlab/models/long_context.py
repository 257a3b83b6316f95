"""Long sequences: sweeps of context parallelism's memory, traffic and time.

Built on the formulas of :mod:`clusterlab.models.context_parallel`; the
long-context lab, its chapter and ``cl.long_context.chart`` read these tables.
GPU peaks, the sustained share of them (MFU) and the links' rates come from
``data/`` (``gpu_specs``, ``step_assumptions``, ``link_assumptions`` with
``interconnect_rates``), never from literals here.

The time model, for one layer's forward pass on one rank, at degree ``d``
(``d`` ranks share a sequence of ``s`` tokens): compute is the layer's matrix
FLOP on ``s/d`` tokens plus causal attention's ``2 s^2 h / d`` FLOP, at
``peak * mfu``. Ring attention with the zig-zag layout hides each of its
``d - 1`` K, V hops behind one step's attention (half a block,
``2 (s/d)^2 h`` FLOP); only what a hop takes beyond that is exposed.
Ulysses' all-to-alls and TP+SP's all-gathers and reduce-scatters wait on the
critical path, all of their time exposed (a generous simplification for TP:
nothing here overlaps it either).
"""

from __future__ import annotations

import pandas as pd

from clusterlab.core import published
from clusterlab.core.validate import check_choice, check_int
from clusterlab.models.activations import layer_params
from clusterlab.models.compute import LLAMA2_7B, LLAMA2_70B, ModelShape, gpu_spec
from clusterlab.models.context_parallel import (
    cp_activation_bytes_per_rank,
    cp_kv_bytes_per_rank,
    tp_sp_bytes_per_rank,
    ulysses_bytes_per_rank,
)
from clusterlab.models.links import LINKS

#: The models the explorer offers, by name.
LONG_CONTEXT_MODELS = {m.name: m for m in (LLAMA2_7B, LLAMA2_70B)}


#: Links the ranks of a sequence may share: inside a node, across nodes.
LONG_CONTEXT_LINKS = {
    "inside a node (NVLink 4)": "NVLink 4",
    "across nodes (InfiniBand NDR)": "NDR400 InfiniBand",
}


METHODS = ("ring attention", "Ulysses", "TP + SP")


def kv_hidden(model: ModelShape) -> int:
    """Key (or value) width: ``n_kv_heads * head_dim``."""
    return model.hidden * model.n_kv_heads // model.n_heads


def long_context_memory_sweep(
    model: ModelShape = LLAMA2_7B,
    seq_len: int = 131072,
    cp_values=(1, 2, 4, 8, 16),
    recompute_modes=("none", "full"),
    gpu: str = "H100 SXM5",
) -> pd.DataFrame:
    """Activation bytes per GPU for each CP degree and recomputation mode.

    Args:
        model: the transformer's shape.
        seq_len: tokens per sequence (128K by default), >= 1.
        cp_values: CP degrees, each dividing ``seq_len``.
        recompute_modes: each "none", "selective" or "full".
        gpu: a ``part`` of ``data/gpu_specs.csv``, for its memory.

    Returns:
        DataFrame: ``model, seq_len, cp, recompute, activation_bytes,
        hbm_bytes`` (the GPU's memory, the same in every row).
    """
    hbm_bytes = gpu_spec(gpu).memory_bytes
    rows = []
    for mode in recompute_modes:
        check_choice("recompute", mode, ("none", "selective", "full"))
        for cp in cp_values:
            act = cp_activation_bytes_per_rank(model, seq_len, cp, recompute=mode)
            rows.append(
                dict(
                    model=model.name,
                    seq_len=seq_len,
                    cp=cp,
                    recompute=mode,
                    activation_bytes=act,
                    hbm_bytes=hbm_bytes,
                )
            )
    return pd.DataFrame(rows)


def _volumes(model, s, d, bytes_per_value):
    kv = kv_hidden(model)
    return {
        "ring attention": cp_kv_bytes_per_rank(s, kv, d, bytes_per_value),
        "Ulysses": ulysses_bytes_per_rank(s, model.hidden, kv, d, bytes_per_value),
        "TP + SP": tp_sp_bytes_per_rank(s, model.hidden, d, bytes_per_value),
    }


def long_context_comm_sweep(
    model: ModelShape = LLAMA2_7B,
    seq_lens=(8192, 16384, 32768, 65536, 131072),
    degree: int = 8,
    bytes_per_value: float = 2.0,
) -> pd.DataFrame:
    """Forward bytes per rank and layer of ring CP, Ulysses and TP+SP.

    Args:
        model: the transformer's shape (hidden, heads, KV heads).
        seq_lens: sequence lengths in tokens.
        degree: ranks sharing the sequence (CP) or the layer (TP), >= 1.
        bytes_per_value: bytes of one activation element, > 0.

    Returns:
        DataFrame: ``method, seq_len, degree, bytes_per_rank``.
    """
    d = check_int("degree", degree, 1)
    rows = [
        dict(method=m, seq_len=s, degree=d, bytes_per_rank=b)
        for s in seq_lens
        for m, b in _volumes(model, s, d, bytes_per_value).items()
    ]
    return pd.DataFrame(rows)


def long_context_time_sweep(
    model: ModelShape = LLAMA2_7B,
    seq_lens=(4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288),
    degree: int = 8,
    links=tuple(LONG_CONTEXT_LINKS),
    gpu: str = "H100 SXM5",
    bytes_per_value: float = 2.0,
) -> pd.DataFrame:
    """Exposed communication of one layer's forward pass, per method and link.

    Args:
        model: the transformer's shape.
        seq_lens: sequence lengths in tokens, each >= ``degree``.
        degree: ranks sharing a sequence (CP) or a layer (TP), >= 2.
        links: names from ``LONG_CONTEXT_LINKS``.
        gpu: a ``part`` of ``data/gpu_specs.csv``.
        bytes_per_value: bytes of one activation element, > 0.

    Returns:
        DataFrame: ``model, gpu, method, where, seq_len, degree, compute_s,
        comm_s, exposed_s, exposed_share`` (exposed over compute + exposed).
    """
    d = check_int("degree", degree, 2)
    sustained = gpu_spec(gpu).peak_flops * published.value(
        "step_assumptions", "value_fraction", quantity="mfu"
    )
    matrix_params = layer_params(
        model.hidden, model.n_heads, model.n_kv_heads, model.ffn_hidden, model.mlp
    )
    rows = []
    for where in links:
        rate_Bps = LINKS[
            LONG_CONTEXT_LINKS[check_choice("link", where, LONG_CONTEXT_LINKS)]
        ]
        rate_Bps = rate_Bps.effective_Bps
        for s in seq_lens:
            s = check_int("seq_len", s, d)
            attn_s = 2.0 * s * s * model.hidden / d / sustained
            compute_s = 2.0 * matrix_params * s / d / sustained + attn_s
            step_attn_s = 2.0 * (s / d) ** 2 * model.hidden / sustained
            for method, nbytes in _volumes(model, s, d, bytes_per_value).items():
                comm_s = nbytes / rate_Bps
                if method == "ring attention":
                    exposed = (d - 1) * max(0.0, comm_s / (d - 1) - step_attn_s)
                else:
                    exposed = comm_s
                rows.append(
                    dict(
                        model=model.name,
                        gpu=gpu,
                        method=method,
                        where=where,
                        seq_len=s,
                        degree=d,
                        compute_s=compute_s,
                        comm_s=comm_s,
                        exposed_s=exposed,
                        exposed_share=exposed / (compute_s + exposed),
                    )
                )
    return pd.DataFrame(rows)


__all__ = [
    "LONG_CONTEXT_LINKS",
    "LONG_CONTEXT_MODELS",
    "kv_hidden",
    "long_context_comm_sweep",
    "long_context_memory_sweep",
    "long_context_time_sweep",
]
