"""Activation memory of one transformer layer: the tensors backward needs kept.

Counted in bytes of 16-bit activations for sequence length ``s``, micro-batch
``b``, hidden size ``h``, ``a`` attention heads (``kv`` of them for keys and
values), MLP width ``f``; ``sbh = s*b*h``. Two formulas, chosen with
``formula=``:

``"flash"`` (the book's default: what a Llama-style run keeps). FlashAttention
(Dao et al. 2022) never stores the ``s x s`` scores: it keeps q, k, v and its
output and recomputes the scores in the backward pass; Llama trains with no
dropout. Counting, as Korthikanti et al. 2022 (section 4.1) do, the inputs each
operation's backward needs:

- attention block: norm input ``2sbh``, norm output (the QKV input) ``2sbh``,
  Q ``2sbh``, K and V ``2sbh*kv/a`` each, attention output (the projection's
  input) ``2sbh``;
- MLP block: norm input ``2sbh``, norm output ``2sbh``; a GeLU MLP keeps fc1's
  output and the GeLU's output, ``2sbf`` each (``4sbf``); a SwiGLU MLP (as in
  Megatron-LM's fused kernel) keeps the gate and up outputs ``4sbf`` and their
  product ``2sbf`` (``6sbf``).

So a layer keeps ``sbh*(12 + 4*kv/a) + c*s*b*f`` bytes, ``c = 4`` (GeLU) or 6
(SwiGLU). For a GPT layer (``f = 4h``, ``kv = a``) that is ``32 sbh``:
Korthikanti's 34 less the two dropout masks (``sbh`` each), with no score term.
Tensor parallelism ``t`` splits all of it but the ``8 sbh`` of norm inputs and
outputs; sequence parallelism splits those too. Left out: FlashAttention's
fp32 log-sum-exp (``4*a*s*b`` bytes, about 0.1% of a layer) and the norms'
statistics.

``"korthikanti"`` (label it "GPT layer, scores materialised"): Korthikanti et
al. 2022, Table 2: ``sbh*(34 + 5*a*s/h)`` for a GPT layer that stores the
softmax scores, its output after dropout and 1-byte dropout masks.

Recomputation. Selective recomputation recomputes the attention scores: it
removes Korthikanti's ``5as/h`` term and changes nothing under "flash", whose
kernel already recomputes them. Full recomputation keeps only each layer's
input, ``2 sbh`` (``/ t`` with sequence parallelism); during the backward pass
one layer's activations are rebuilt (:func:`recompute_working_set`).
"""

from __future__ import annotations

from clusterlab.core.validate import check_choice, check_int

RECOMPUTE_MODES = ("none", "selective", "full")


#: "flash" (FlashAttention, no dropout; the default) or "korthikanti" (a GPT
#: layer with materialised scores and dropout, Korthikanti et al. 2022 Table 2).
ACTIVATION_FORMULAS = ("flash", "korthikanti")


#: MLP kinds: bytes of ``s*b*f`` kept per layer (see the module docstring).
MLP_KINDS = {"gelu": 4.0, "swiglu": 6.0}


def _kv_ratio(n_heads, n_kv_heads) -> float:
    if n_kv_heads is None:
        return 1.0
    if n_heads is None:
        raise ValueError(
            f"n_heads=None with n_kv_heads={n_kv_heads!r}: give the number of "
            "heads (an integer >= 1) too"
        )
    a = check_int("n_heads", n_heads, 1)
    return check_int("n_kv_heads", n_kv_heads, 1, a) / a


def activation_memory_per_layer(
    hidden: int,
    seq_len: int,
    micro_batch: int = 1,
    n_heads: int | None = None,
    *,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
    formula: str = "flash",
    n_kv_heads: int | None = None,
    ffn_hidden: int | None = None,
    mlp: str = "gelu",
) -> float:
    """Bytes of 16-bit activations one transformer layer keeps for backward.

    ``"flash"``: ``sbh*(8 + (4 + 4*kv/a)/t) + c*s*b*f/t`` with TP alone, all of
    it ``/ t`` with sequence parallelism (module docstring).
    ``"korthikanti"`` (Table 2 of Korthikanti et al. 2022): ``sbh*(10 + 24/t +
    5*a*s/(h*t))``, ``sbh*(34 + 5*a*s/h)/t`` with sequence parallelism, minus
    the ``5as/h`` term under selective recomputation. Full recomputation:
    ``2*sbh`` (``/ t`` with sequence parallelism), either formula.

    Args:
        hidden: hidden size h, >= 1.
        seq_len: sequence length s in tokens, >= 1.
        micro_batch: sequences per micro-batch b, >= 1.
        n_heads: attention heads a (needed by "korthikanti" with
            ``recompute="none"``, and with ``n_kv_heads``).
        tp: tensor-parallel degree t, >= 1.
        sequence_parallel: whether sequence parallelism splits the rest.
        recompute: "none", "selective" or "full".
        formula: "flash" (default) or "korthikanti".
        n_kv_heads: key/value heads (grouped-query attention); None: ``a``.
        ffn_hidden: MLP width f; None: ``4 * hidden``.
        mlp: "gelu" or "swiglu" ("flash" only; Korthikanti's is GeLU, 4h).

    Returns:
        Bytes per layer per GPU.
    """
    h = check_int("hidden", hidden, 1)
    s = check_int("seq_len", seq_len, 1)
    b = check_int("micro_batch", micro_batch, 1)
    t = check_int("tp", tp, 1)
    recompute = check_choice("recompute", recompute, RECOMPUTE_MODES)
    formula = check_choice("formula", formula, ACTIVATION_FORMULAS)
    sbh = float(s) * b * h
    if recompute == "full":
        return 2.0 * sbh / (t if sequence_parallel else 1)
    if formula == "flash":
        c = MLP_KINDS[check_choice("mlp", mlp, MLP_KINDS)]
        f = 4 * h if ffn_hidden is None else check_int("ffn_hidden", ffn_hidden, 1)
        split = sbh * (4.0 + 4.0 * _kv_ratio(n_heads, n_kv_heads)) + c * s * b * f
        kept = 8.0 * sbh
        return (kept + split) / t if sequence_parallel else kept + split / t
    if recompute == "none":
        if n_heads is None:
            raise ValueError(
                "n_heads=None: the attention-score term 5*a*s/h needs the number "
                "of heads (an integer >= 1), or use recompute='selective'"
            )
        scores = 5.0 * check_int("n_heads", n_heads, 1) * s / h
    else:
        scores = 0.0
    if sequence_parallel:
        return sbh * (34.0 + scores) / t
    return sbh * (10.0 + 24.0 / t + scores / t)


def recompute_working_set(
    hidden: int,
    seq_len: int,
    micro_batch: int = 1,
    n_heads: int | None = None,
    *,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
    formula: str = "flash",
    n_kv_heads: int | None = None,
    ffn_hidden: int | None = None,
    mlp: str = "gelu",
) -> float:
    """Bytes that recomputation rebuilds for one layer during the backward pass.

    Full recomputation reruns one layer's forward pass before its backward, so
    for a moment that layer holds everything ``recompute="none"`` would keep.
    Selective recomputation under "korthikanti" rebuilds one layer's scores,
    softmax output after dropout and mask: ``5*a*s^2*b / t`` bytes (0 when
    ``n_heads`` is not given). No recomputation, and selective under "flash",
    rebuild nothing.

    Args:
        hidden, seq_len, micro_batch, n_heads, tp, sequence_parallel,
        recompute, formula, n_kv_heads, ffn_hidden, mlp: as for
            :func:`activation_memory_per_layer`.

    Returns:
        Bytes per GPU, for one layer and one micro-batch.
    """
    recompute = check_choice("recompute", recompute, RECOMPUTE_MODES)
    formula = check_choice("formula", formula, ACTIVATION_FORMULAS)
    shape = dict(tp=tp, sequence_parallel=sequence_parallel, formula=formula)
    shape.update(n_kv_heads=n_kv_heads, ffn_hidden=ffn_hidden, mlp=mlp)
    if recompute == "full":
        if formula == "korthikanti" and n_heads is None:
            # Without the heads, count the layer as selective recomputation would.
            return activation_memory_per_layer(
                hidden, seq_len, micro_batch, recompute="selective", **shape
            )
        args = (hidden, seq_len, micro_batch, n_heads)
        return activation_memory_per_layer(*args, **shape)
    if recompute == "selective" and formula == "korthikanti" and n_heads is not None:
        t = check_int("tp", tp, 1)
        a = check_int("n_heads", n_heads, 1)
        return 5.0 * a * float(seq_len) ** 2 * micro_batch / t
    return 0.0


def layer_params(
    hidden: int,
    n_heads: int | None = None,
    n_kv_heads: int | None = None,
    ffn_hidden: int | None = None,
    mlp: str = "gelu",
) -> float:
    """Parameters of one transformer layer's matrices (biases and norms left out).

    Attention: Q and the output projection ``h x h`` each, K and V ``h x
    (h*kv/a)`` each; MLP: two ``h x f`` matrices (GeLU) or three (SwiGLU).
    GPT (``f = 4h``, ``kv = a``): ``4h^2 + 8h^2 = 12 h^2``.

    Args:
        hidden: hidden size h, >= 1.
        n_heads, n_kv_heads: attention and key/value heads (None: ``kv = a``).
        ffn_hidden: MLP width f (None: ``4h``).
        mlp: "gelu" or "swiglu".

    Returns:
        Parameters per layer.
    """
    h = check_int("hidden", hidden, 1)
    mlp = check_choice("mlp", mlp, MLP_KINDS)
    f = 4 * h if ffn_hidden is None else check_int("ffn_hidden", ffn_hidden, 1)
    attention = 2.0 * h * h * (1.0 + _kv_ratio(n_heads, n_kv_heads))
    return attention + (3.0 if mlp == "swiglu" else 2.0) * h * f


__all__ = [
    "ACTIVATION_FORMULAS",
    "MLP_KINDS",
    "RECOMPUTE_MODES",
    "activation_memory_per_layer",
    "layer_params",
    "recompute_working_set",
]
