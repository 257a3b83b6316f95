"""Context parallelism's price: bytes per rank, overlap and activation memory.

Context parallelism (CP) cuts one sequence into ``cp`` shards of
``seq_len / cp`` tokens, one per rank. Everything but attention is per token
and needs no communication; attention needs every earlier key and value.

* **Ring attention** (Liu et al. 2023) passes each rank's K and V blocks round
  a ring: ``cp - 1`` hops of ``2 * (seq_len / cp) * kv_hidden`` values per
  rank and layer in the forward pass, each hop hidden behind the attention
  of the block already in hand when that block is big enough
  (:func:`ring_overlap_min_tokens`).
* **Ulysses** (Jacobs et al. 2023) swaps the sequence split for a head split
  with an all-to-all before attention (Q, K, V) and one after (the output).
* **Tensor parallelism with sequence parallelism** (Korthikanti et al. 2022)
  all-gathers and reduce-scatters the activations twice per layer, on the
  critical path, whatever the sequence length.

Volumes are bytes one rank sends for one sequence (multiply by the
micro-batch) in one attention layer. Activation memory reuses
:mod:`clusterlab.models.activations`: CP divides every term by ``cp``.
"""

from __future__ import annotations

from clusterlab.core.validate import check_float, check_int
from clusterlab.models.activations import (
    activation_memory_per_layer,
    recompute_working_set,
)
from clusterlab.models.compute import ModelShape


def _args(seq_len, kv_hidden, cp, bytes_per_value):
    s = check_int("seq_len", seq_len, 1)
    kv = check_int("kv_hidden", kv_hidden, 1)
    c = check_int("cp", cp, 1)
    b = check_float("bytes_per_value", bytes_per_value, 0.0, low_inclusive=False)
    return s, kv, c, b


def cp_kv_bytes_per_rank(
    seq_len: int, kv_hidden: int, cp: int, bytes_per_value: float
) -> float:
    """Bytes one rank sends per attention layer in ring attention's forward pass.

    Each rank holds K and V blocks of ``(seq_len / cp) * kv_hidden`` values and
    passes a block pair to its neighbour ``cp - 1`` times, so that every query
    shard meets every key shard: ``2 * (seq_len / cp) * kv_hidden *
    bytes_per_value * (cp - 1)``. As ``cp`` grows this tends to ``2 * seq_len *
    kv_hidden * bytes_per_value``: a rank sends about the whole sequence's K
    and V once, however many ranks share it.

    The backward pass sends about twice as much
    (:func:`cp_kv_bytes_backward_per_rank`): K and V go round again (``cp - 1``
    hops) and the dK and dV accumulators follow them, ``cp`` hops (the last one
    takes them home to the rank that owns the block).

    Args:
        seq_len: tokens in the whole sequence, >= 1.
        kv_hidden: key (or value) width, ``n_kv_heads * head_dim``, >= 1.
        cp: context-parallel ranks, >= 1.
        bytes_per_value: bytes of one element (2 for bf16), > 0.

    Returns:
        Bytes sent by one rank for one sequence and one layer.
    """
    s, kv, c, b = _args(seq_len, kv_hidden, cp, bytes_per_value)
    return 2.0 * (s / c) * kv * b * (c - 1)


def cp_kv_bytes_backward_per_rank(
    seq_len: int,
    kv_hidden: int,
    cp: int,
    bytes_per_value: float,
    grad_bytes_per_value: float | None = None,
) -> float:
    """Bytes one rank sends per attention layer in ring attention's backward pass.

    K and V travel ``cp - 1`` hops as in the forward pass; dK and dV (often
    kept in fp32, ``grad_bytes_per_value = 4``) travel ``cp`` hops:
    ``2 * (s / cp) * kv * (b * (cp - 1) + g * cp)`` with ``cp > 1``; 0 with
    ``cp = 1``.

    Args:
        seq_len, kv_hidden, cp, bytes_per_value: as for
            :func:`cp_kv_bytes_per_rank`.
        grad_bytes_per_value: bytes of one gradient element; None: the same as
            ``bytes_per_value``.

    Returns:
        Bytes sent by one rank for one sequence and one layer.
    """
    s, kv, c, b = _args(seq_len, kv_hidden, cp, bytes_per_value)
    g = b if grad_bytes_per_value is None else grad_bytes_per_value
    g = check_float("grad_bytes_per_value", g, 0.0, low_inclusive=False)
    if c == 1:
        return 0.0
    return 2.0 * (s / c) * kv * (b * (c - 1) + g * c)


def ulysses_bytes_per_rank(
    seq_len: int, hidden: int, kv_hidden: int, cp: int, bytes_per_value: float
) -> float:
    """Bytes one rank sends per attention layer in Ulysses' forward pass.

    Three all-to-alls turn Q (``hidden`` wide), K and V (``kv_hidden`` each)
    from a sequence split into a head split, and one turns the output back; an
    all-to-all keeps ``1/cp`` of a rank's ``seq_len/cp`` tokens and sends the
    rest: ``(2*hidden + 2*kv_hidden) * (seq_len/cp) * (cp-1)/cp * bytes``.

    Args:
        seq_len: tokens in the sequence, >= 1.
        hidden: query (and output) width, >= 1.
        kv_hidden: key (or value) width, >= 1.
        cp: ranks, >= 1 (it must divide the heads, which this model leaves out).
        bytes_per_value: bytes of one element, > 0.

    Returns:
        Bytes sent by one rank for one sequence and one layer.
    """
    s, kv, c, b = _args(seq_len, kv_hidden, cp, bytes_per_value)
    h = check_int("hidden", hidden, 1)
    return (2.0 * h + 2.0 * kv) * (s / c) * (c - 1) / c * b


def tp_sp_bytes_per_rank(
    seq_len: int, hidden: int, tp: int, bytes_per_value: float
) -> float:
    """Bytes one rank sends per layer for tensor with sequence parallelism.

    Forward pass of one layer: an all-gather before attention and one before
    the MLP, a reduce-scatter after each; each sends ``(tp-1)/tp`` of the
    layer's ``seq_len * hidden`` activations: ``4 * s * h * (tp-1)/tp * bytes``
    (the same as TP's two ring all-reduces without sequence parallelism).

    Args:
        seq_len: tokens in the sequence, >= 1.
        hidden: hidden size, >= 1.
        tp: tensor-parallel ranks, >= 1.
        bytes_per_value: bytes of one element, > 0.

    Returns:
        Bytes sent by one rank for one sequence and one layer.
    """
    s, h, t, b = _args(seq_len, hidden, tp, bytes_per_value)
    return 4.0 * s * h * (t - 1) / t * b


def ring_overlap_min_tokens(
    hidden: int,
    kv_hidden: int,
    flops: float,
    link_Bps: float,
    bytes_per_value: float = 2.0,
    causal: bool = False,
) -> float:
    """Smallest shard (tokens) whose attention hides one K, V hop of the ring.

    One step's attention on ``c`` query and ``c`` key tokens costs ``4 * c**2
    * hidden`` FLOP (scores and weighted sum, 2 FLOP per multiply-add); the
    hop moves ``2 * c * kv_hidden * bytes`` bytes. Compute covers the hop when
    ``4 c^2 h / flops >= 2 c kv b / link_Bps``, i.e. ``c >= kv * b * flops /
    (2 * h * link_Bps)`` (Liu et al. 2023 state it as block size >= FLOPs /
    bandwidth). Causal attention in the zig-zag layout computes half a block
    per step, so it needs twice the shard.

    Args:
        hidden: query width, >= 1.
        kv_hidden: key (or value) width, >= 1.
        flops: attention FLOP/s one GPU sustains, > 0.
        link_Bps: bytes/s per direction of the ring's link, > 0.
        bytes_per_value: bytes of one K or V element, > 0.
        causal: True for causal attention with the zig-zag layout.

    Returns:
        Tokens per rank (a float; round up for a shard size).
    """
    h = check_int("hidden", hidden, 1)
    kv = check_int("kv_hidden", kv_hidden, 1)
    f = check_float("flops", flops, 0.0, low_inclusive=False)
    bw = check_float("link_Bps", link_Bps, 0.0, low_inclusive=False)
    b = check_float("bytes_per_value", bytes_per_value, 0.0, low_inclusive=False)
    return kv * b * f / (2.0 * h * bw) * (2.0 if causal else 1.0)


def cp_activation_bytes_per_rank(
    model: ModelShape,
    seq_len: int,
    cp: int = 1,
    *,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
    micro_batch: int = 1,
) -> float:
    """Bytes of activations one GPU keeps for the whole model, with CP.

    Every term of :func:`~clusterlab.models.activations.activation_memory_per_layer`
    (FlashAttention formula) is linear in the tokens a rank holds, so CP keeps
    the layer count times the per-layer bytes of ``seq_len / cp`` tokens, plus,
    under recomputation, the one layer rebuilt during the backward pass
    (:func:`~clusterlab.models.activations.recompute_working_set`). The K, V
    blocks in flight add ``2 * 2 * (s/cp) * kv`` bytes per rank, left out:
    under 1% of a layer.

    Args:
        model: the transformer's shape.
        seq_len: tokens per sequence, >= 1, divisible by ``cp``.
        cp: context-parallel ranks, >= 1.
        tp, sequence_parallel, recompute, micro_batch: as for
            ``activation_memory_per_layer``.

    Returns:
        Bytes per GPU.
    """
    s = check_int("seq_len", seq_len, 1)
    c = check_int("cp", cp, 1, s)
    if s % c:
        raise ValueError(f"cp={c} must divide seq_len={s}")
    args = (model.hidden, s // c, micro_batch, model.n_heads)
    shape = dict(
        tp=tp,
        sequence_parallel=sequence_parallel,
        recompute=recompute,
        n_kv_heads=model.n_kv_heads,
        ffn_hidden=model.ffn_hidden,
        mlp=model.mlp,
    )
    kept = model.n_layers * activation_memory_per_layer(*args, **shape)
    return kept + recompute_working_set(*args, **shape)


def ring_saved_bytes_per_rank(
    seq_len: int,
    hidden: int,
    kv_hidden: int,
    n_heads: int,
    cp: int,
    bytes_per_value: float,
    lse_bytes_per_value: float | None = None,
) -> float:
    """Bytes ring attention keeps per rank for its backward pass, per sequence.

    It keeps this rank's Q and output (``hidden`` wide), K and V (``kv_hidden``
    each) and one log-sum-exp per head and query: ``(2h + 2kv) * (s/cp) * b +
    a * (s/cp) * lse_b``. No ``s x s`` score matrix is kept: like
    FlashAttention, the backward pass recomputes the scores block by block.

    Args:
        seq_len: tokens in the sequence, >= 1.
        hidden: query width, >= 1.
        kv_hidden: key (or value) width, >= 1.
        n_heads: attention heads, >= 1.
        cp: context-parallel ranks, >= 1.
        bytes_per_value: bytes of one element of Q, K, V and output, > 0.
        lse_bytes_per_value: bytes of one log-sum-exp (FlashAttention keeps
            fp32, 4); None: ``bytes_per_value``.

    Returns:
        Bytes per rank for one sequence and one attention layer.
    """
    s, kv, c, b = _args(seq_len, kv_hidden, cp, bytes_per_value)
    h = check_int("hidden", hidden, 1)
    a = check_int("n_heads", n_heads, 1)
    lb = b if lse_bytes_per_value is None else lse_bytes_per_value
    lb = check_float("lse_bytes_per_value", lb, 0.0, low_inclusive=False)
    return (2.0 * h + 2.0 * kv) * (s / c) * b + a * (s / c) * lb


def allgather_cp_per_rank(
    seq_len: int, kv_hidden: int, cp: int, bytes_per_value: float,
    link_Bps: float | None = None,
) -> dict:  # fmt: skip
    """All-gather context parallelism, per rank and attention layer, forward.

    The third design beside the ring and Ulysses, and the one Llama 3 used:
    before attention every rank all-gathers the whole sequence's K and V,
    then computes attention for its own query shard (its two zig-zag chunks)
    with no further messages. It sends what the ring sends, its shard to each
    of the other ``cp - 1`` ranks, but in one collective before the arithmetic,
    so nothing hides it; and it holds the whole sequence's K and V for the
    layer, which grouped-query attention makes small (Llama 3's ``kv_hidden``
    is an eighth of its model width).

    Args:
        seq_len: tokens in the whole sequence, >= 1.
        kv_hidden: key (or value) width, ``n_kv_heads * head_dim``, >= 1.
        cp: context-parallel ranks, >= 1.
        bytes_per_value: bytes of one element (2 for bf16), > 0.
        link_Bps: None, or the bytes/s per rank of the links the gather
            crosses: then ``exposed_s``, the gather's time on the critical path.

    Returns:
        ``sent_bytes`` (= :func:`cp_kv_bytes_per_rank`), ``held_kv_bytes`` (the
        gathered K and V, ``2 * seq_len * kv_hidden * bytes_per_value``) and,
        with ``link_Bps``, ``exposed_s`` (``sent_bytes / link_Bps``).
    """
    s, kv, c, b = _args(seq_len, kv_hidden, cp, bytes_per_value)
    out = {"sent_bytes": 2.0 * (s / c) * kv * b * (c - 1),
           "held_kv_bytes": 2.0 * s * kv * b}  # fmt: skip
    if link_Bps is not None:
        bw = check_float("link_Bps", link_Bps, 0.0, low_inclusive=False)
        out["exposed_s"] = out["sent_bytes"] / bw
    return out


__all__ = [
    "allgather_cp_per_rank",
    "cp_activation_bytes_per_rank",
    "cp_kv_bytes_backward_per_rank",
    "cp_kv_bytes_per_rank",
    "ring_overlap_min_tokens",
    "ring_saved_bytes_per_rank",
    "tp_sp_bytes_per_rank",
    "ulysses_bytes_per_rank",
]
