"""Training compute: FLOPs per token, training time and MFU.

A dense transformer with ``N`` parameters spends about ``6 N`` FLOPs per token
in training: 2 N in the forward pass and 4 N in the backward pass (Kaplan et
al. 2020). Attention adds ``12 * L * h * s`` per token for ``L`` layers, hidden
size ``h`` and sequence length ``s`` (Chowdhery et al. 2022, PaLM, appendix B).

One MFU definition, used throughout the book: **MFU counts 6N + 12·L·h·s FLOPs
per token** (PaLM's definition, Chowdhery et al. 2022, appendix B), divided by
the GPUs' peak dense 16-bit FLOP/s. Recomputed work does not count, so MFU
measures useful work. The functions below take the shape (``n_layers``,
``hidden``, ``seq_len``) to compute it; called without the shape they give the
**6N-only MFU**, a few percent lower (about 7% lower for Llama 2 70B at 4,096
tokens), and every place that uses it says "6N-only".

The model shapes below are documented constants with their sources; the GPU's
peak and memory are read from ``data/gpu_specs.csv``.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterlab.core import published
from clusterlab.core.validate import check_float, check_int


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer's size and shape (lengths in tokens).

    ``mlp`` is "gelu" (GPT: two matrices, f = 4h) or "swiglu" (Llama: three).
    """

    name: str
    n_params: float
    n_layers: int
    hidden: int
    n_heads: int
    n_kv_heads: int
    ffn_hidden: int
    vocab: int
    seq_len: int
    mlp: str = "gelu"


@dataclass(frozen=True)
class GPUSpec:
    """One GPU's peak dense 16-bit FLOP/s and memory (bytes)."""

    name: str
    peak_flops: float
    memory_bytes: float


#: Llama 2 70B (Touvron et al. 2023, arXiv:2307.09288): 80 layers, hidden 8192,
#: 64 heads with 8 KV heads (GQA), FFN 28672, vocabulary 32000, context 4096.
#: 70e9 is the nominal size the paper and the claims use.
LLAMA2_70B = ModelShape(
    "Llama 2 70B", 70e9, 80, 8192, 64, 8, 28672, 32000, 4096, "swiglu"
)


#: Llama 2 7B and 13B keep the Llama 1 shapes (Touvron et al. 2023, arXiv:
#: 2302.13971, Table 2) with a 4096-token context; FFN widths from the released
#: configurations (11008 and 13824).
LLAMA2_7B = ModelShape(
    "Llama 2 7B", 7e9, 32, 4096, 32, 32, 11008, 32000, 4096, "swiglu"
)


LLAMA2_13B = ModelShape(
    "Llama 2 13B", 13e9, 40, 5120, 40, 40, 13824, 32000, 4096, "swiglu"
)


#: GPT-3 175B (Brown et al. 2020, arXiv:2005.14165, Table 2.1): 96 layers,
#: hidden 12288, 96 heads, context 2048; vocabulary 50257.
GPT3_175B = ModelShape("GPT-3 175B", 175e9, 96, 12288, 96, 96, 49152, 50257, 2048)


def gpu_spec(part: str = "H100 SXM5") -> GPUSpec:
    """A GPU's dense BF16 peak and HBM size, from ``data/gpu_specs.csv``.

    Args:
        part: a ``part`` of that table ("H100 SXM5", "H200 SXM", ...).

    Returns:
        The spec; its numbers come from the datasheet row the table cites.
    """
    flops = published.value("gpu_specs", "bf16_dense_flops", part=part)
    memory = published.value("gpu_specs", "hbm_bytes", part=part)
    return GPUSpec(part, flops, memory)


#: H100 SXM5 (NVIDIA H100 datasheet, read from data/gpu_specs.csv): 989.4
#: TFLOP/s dense BF16 (1979 is the 2:4-sparse figure, which training does not
#: reach) and 80 GB of HBM3 (80e9 bytes, a little under the 80 GiB on the
#: device, which leaves some room for the CUDA context).
H100_SXM = gpu_spec("H100 SXM5")


def flops_per_token(
    n_params: float,
    n_layers: int | None = None,
    hidden: int | None = None,
    seq_len: int | None = None,
) -> float:
    """Training FLOPs per token: ``6 N``, plus ``12 L h s`` with the shape.

    Args:
        n_params: non-embedding parameters N, > 0.
        n_layers, hidden, seq_len: give all three to add the attention term,
            or none of them for the plain 6N rule.

    Returns:
        FLOPs per token (forward plus backward).
    """
    n = check_float("n_params", n_params, 0.0, low_inclusive=False)
    shape = (n_layers, hidden, seq_len)
    if all(v is None for v in shape):
        return 6.0 * n
    if any(v is None for v in shape):
        raise ValueError(
            f"n_layers={n_layers!r}, hidden={hidden!r}, seq_len={seq_len!r}: "
            "give all three (integers >= 1) for the attention term, or none"
        )
    n_layers = check_int("n_layers", n_layers, 1)
    hidden = check_int("hidden", hidden, 1)
    seq_len = check_int("seq_len", seq_len, 1)
    return 6.0 * n + 12.0 * n_layers * hidden * seq_len


def _peak_and_mfu(n_gpus, peak_flops, mfu):
    n_gpus = check_int("n_gpus", n_gpus, 1)
    peak = check_float("peak_flops", peak_flops, 0.0, low_inclusive=False)
    mfu = check_float("mfu", mfu, 0.0, 1.0, low_inclusive=False)
    return n_gpus, peak, mfu


def training_time(
    n_params: float,
    n_tokens: float,
    n_gpus: int,
    peak_flops: float,
    mfu: float,
    *,
    n_layers: int | None = None,
    hidden: int | None = None,
    seq_len: int | None = None,
) -> float:
    """Wall-clock seconds to train on ``n_tokens`` tokens at a given MFU.

    ``flops_per_token * D / (n_gpus * peak_flops * mfu)``; with no shape this
    is the ``6 N D`` rule. It assumes perfect scaling at the given MFU (no
    failures, no restarts); the checkpointing lab adds those.

    Args:
        n_params: parameters N, > 0.
        n_tokens: training tokens D, > 0.
        n_gpus: GPUs, >= 1.
        peak_flops: peak FLOP/s of one GPU, > 0.
        mfu: model FLOPs utilisation, in (0, 1].
        n_layers, hidden, seq_len: optional shape for the attention term.

    Returns:
        Seconds.
    """
    per_token = flops_per_token(n_params, n_layers, hidden, seq_len)
    d = check_float("n_tokens", n_tokens, 0.0, low_inclusive=False)
    n_gpus, peak, mfu = _peak_and_mfu(n_gpus, peak_flops, mfu)
    return per_token * d / (n_gpus * peak * mfu)


def mfu_from_throughput(
    tokens_per_s: float,
    n_params: float,
    n_gpus: int,
    peak_flops: float,
    *,
    n_layers: int | None = None,
    hidden: int | None = None,
    seq_len: int | None = None,
) -> float:
    """MFU implied by a measured training throughput.

    ``tokens_per_s * flops_per_token / (n_gpus * peak_flops)``: the book's MFU
    (6N + 12Lhs per token) with the shape, the 6N-only MFU without. A result above
    1 means the throughput is impossible on that hardware; it is returned, not
    clipped, so that a reader sees it.

    Args:
        tokens_per_s: training tokens processed per second by the whole job, > 0.
        n_params: parameters N, > 0.
        n_gpus: GPUs, >= 1.
        peak_flops: peak FLOP/s of one GPU, > 0.
        n_layers, hidden, seq_len: optional shape for the attention term.

    Returns:
        The fraction of peak (dimensionless).
    """
    rate = check_float("tokens_per_s", tokens_per_s, 0.0, low_inclusive=False)
    per_token = flops_per_token(n_params, n_layers, hidden, seq_len)
    n_gpus = check_int("n_gpus", n_gpus, 1)
    peak = check_float("peak_flops", peak_flops, 0.0, low_inclusive=False)
    return rate * per_token / (n_gpus * peak)


def tokens_per_s_at_mfu(
    n_params: float,
    n_gpus: int,
    peak_flops: float,
    mfu: float,
    *,
    n_layers: int | None = None,
    hidden: int | None = None,
    seq_len: int | None = None,
) -> float:
    """Training tokens/s a job reaches at a given MFU (the inverse of the above).

    Args:
        n_params: parameters N, > 0.
        n_gpus: GPUs, >= 1.
        peak_flops: peak FLOP/s of one GPU, > 0.
        mfu: model FLOPs utilisation, in (0, 1].
        n_layers, hidden, seq_len: optional shape for the attention term.

    Returns:
        Tokens per second for the whole job.
    """
    per_token = flops_per_token(n_params, n_layers, hidden, seq_len)
    n_gpus, peak, mfu = _peak_and_mfu(n_gpus, peak_flops, mfu)
    return n_gpus * peak * mfu / per_token


__all__ = [
    "GPT3_175B",
    "GPUSpec",
    "H100_SXM",
    "LLAMA2_13B",
    "LLAMA2_70B",
    "LLAMA2_7B",
    "ModelShape",
    "flops_per_token",
    "gpu_spec",
    "mfu_from_throughput",
    "tokens_per_s_at_mfu",
    "training_time",
]
