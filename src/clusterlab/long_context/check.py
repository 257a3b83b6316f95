"""Checks of the long-context lab: ring attention against full attention.

The lab's claims, each decided here so that a test can feed a wrong input:

* :func:`attention_matches_full`: the ranks' shards of ring (or Ulysses)
  attention, put back in order, equal one process's attention, output and the
  gradients of q, k and v;
* :func:`ring_bytes_match_model`: the bytes the ring handed to send equal
  ``cl.models.context_parallel``'s count, forward and backward;
* :func:`zigzag_balances_work`: under a causal mask the zig-zag layout gives
  every rank the same work, the contiguous one does not;
* :func:`saved_bytes_match_model`: what the ring keeps for backward per rank
  equals the model's count, and falls as ``1 / W``.

Each returns True or raises ``AssertionError`` naming what does not hold.
:func:`merge_partial_attention` is the exercise's check (the online softmax).
"""

from __future__ import annotations

import torch

from clusterlab.core.checks import not_attempted, passed
from clusterlab.long_context.blocks import block_attention_forward
from clusterlab.long_context.workers import gather_shards
from clusterlab.models.context_parallel import (
    cp_kv_bytes_backward_per_rank,
    cp_kv_bytes_per_rank,
    ring_saved_bytes_per_rank,
)

_NAMES = {"out": "the output", "dq": "q's gradient", "dk": "k's gradient"}


_NAMES["dv"] = "v's gradient"


def attention_matches_full(shards, reference, layout="contiguous", atol=1e-6):
    """Check that the ranks' shards make up one process's attention.

    Args:
        shards: one dict per rank (index = rank) with ``out, dq, dk, dv``.
        reference: whole-sequence ``out, dq, dk, dv``
            (``cl.long_context.workers.reference_attention``).
        layout: how the shards cut the sequence: "contiguous" or "zigzag".
        atol: the largest absolute difference allowed (float64: 1e-10 holds).

    Returns:
        True; raises ``AssertionError`` naming the tensor that differs.
    """
    for key, what in _NAMES.items():
        got = gather_shards([s[key] for s in shards], layout)
        want = reference[key]
        if got.shape != want.shape:
            raise AssertionError(
                f"{what}: the shards make shape {tuple(got.shape)}, one process "
                f"{tuple(want.shape)}"
            )
        err = (got - want).abs().max().item()
        if not err <= atol:
            raise AssertionError(
                f"{what} differs from one process's attention by up to {err:.3g} "
                f"(allowed {atol:g}) on {len(shards)} ranks ({layout} layout)"
            )
    return True


def ring_bytes_match_model(stats, batch, seq_len, kv_hidden, bytes_per_value):
    """Check the bytes each rank sent against the ring's model, both passes.

    Args:
        stats: one ``ring_attention`` stats dict per rank (after backward).
        batch: sequences in the batch, >= 1.
        seq_len: tokens in the whole sequence.
        kv_hidden: ``heads * head_dim`` of K (and V).
        bytes_per_value: bytes of one element.

    Returns:
        True; raises ``AssertionError`` naming the rank and pass that differ.
    """
    w = len(stats)
    want = {
        "forward_bytes": cp_kv_bytes_per_rank(seq_len, kv_hidden, w, bytes_per_value),
        "backward_bytes": cp_kv_bytes_backward_per_rank(
            seq_len, kv_hidden, w, bytes_per_value
        ),
    }
    for rank, st in enumerate(stats):
        for key, per_seq in want.items():
            if st.get(key) != batch * per_seq:
                raise AssertionError(
                    f"rank {rank} of {w} sent {st.get(key)} bytes in the "
                    f"{key.split('_')[0]} pass, the model {batch * per_seq:.0f}"
                )
    return True


def zigzag_balances_work(contiguous_scores, zigzag_scores):
    """Check that zig-zag evens out causal work and contiguous shards do not.

    Args:
        contiguous_scores: scores each rank computed (index = rank), causal,
            contiguous shards (``stats["scores"]``).
        zigzag_scores: the same with the zig-zag layout.

    Returns:
        True; raises ``AssertionError`` saying which layout broke the claim.
    """
    w = len(zigzag_scores)
    if len(contiguous_scores) != w or w < 2:
        raise AssertionError(f"need both layouts on the same >= 2 ranks, got {w}")
    if max(zigzag_scores) != min(zigzag_scores):
        raise AssertionError(
            f"zig-zag: the ranks computed {list(zigzag_scores)} scores; "
            "the layout should give every rank the same work"
        )
    if not max(contiguous_scores) >= 1.5 * min(contiguous_scores):
        raise AssertionError(
            f"contiguous: the ranks computed {list(contiguous_scores)} scores; "
            "under a causal mask the last rank should do the most"
        )
    return True


#: how much faster zig-zag's slowest rank must be than contiguous's, as a
#: share of what the work counts say (the rest is per-block overhead and noise)
ZIGZAG_TIME_SHARE = 0.5


def zigzag_balances_time(
    contiguous_s, zigzag_s, contiguous_scores, zigzag_scores,
    share: float = ZIGZAG_TIME_SHARE,
) -> dict:  # fmt: skip
    """Check, on measured time, that zig-zag's slowest rank finishes sooner.

    The work counts say how much the slowest rank's work falls; the time each
    rank spent in its block products (``stats["compute_s"]``, this thread's
    CPU seconds, so waits and other processes on the same cores are left out)
    must fall by at least ``share`` of that, and contiguous shards' slowest
    rank must take longer than its fastest. A layout that balances nothing
    fails, whatever its counts say.

    Args:
        contiguous_s, zigzag_s: seconds each rank spent (index = rank).
        contiguous_scores, zigzag_scores: the work counts of the same runs.
        share: the least part of the counted gain to see in time, in (0, 1].

    Returns:
        ``{"time_ratio", "work_ratio"}``: the slowest rank, contiguous over
        zig-zag, in seconds and in counted work.
    """
    from clusterlab.core.validate import check_float

    share = check_float("share", share, 0.0, 1.0, low_inclusive=False)
    w = len(zigzag_s)
    if not w == len(contiguous_s) == len(contiguous_scores) == len(zigzag_scores):
        raise ValueError("every list must have one entry per rank, the same ranks")
    if min(min(contiguous_s), min(zigzag_s)) <= 0:
        raise ValueError("the times must be > 0 seconds")
    work = max(contiguous_scores) / max(zigzag_scores)
    ratio = max(contiguous_s) / max(zigzag_s)
    want = 1 + share * (work - 1)
    if ratio < want:
        raise AssertionError(
            f"the slowest rank took {max(contiguous_s) * 1e3:.2f} ms contiguous and "
            f"{max(zigzag_s) * 1e3:.2f} ms zig-zag, {ratio:.2f}x; the work counts "
            f"say {work:.2f}x, so at least {want:.2f}x was expected"
        )
    if not max(contiguous_s) > min(contiguous_s):
        raise AssertionError("contiguous shards took the same time on every rank")
    return {"time_ratio": ratio, "work_ratio": work}


def timed_balance(ranks: int = 4, tries: int = 3, **shape) -> dict:
    """Time both layouts on real ranks and decide with ``zigzag_balances_time``.

    A busy machine can only slow a rank (the measure is its thread's CPU time,
    so waiting is left out, but shared caches still cost), so a miss is
    measured again, at most ``tries`` times in all, saying so
    (``cl.core.busy.retry``); a layout that balances nothing misses every try.

    Args:
        ranks: ranks of the ring, in [2, 8].
        tries: measurements at most, in [1, 10].
        **shape: ``heads``, ``seq``, ``head_dim`` for the worker.

    Returns:
        ``{"contiguous_s", "zigzag_s", "time_ratio", "work_ratio"}``.
    """
    from clusterlab.core.busy import retry
    from clusterlab.core.launcher import launch
    from clusterlab.core.validate import check_int
    from clusterlab.long_context.workers import balance_timing_worker

    ranks = check_int("ranks", ranks, 2, 8)

    def measure():
        res = launch(balance_timing_worker, ranks, timeout=120, **shape)
        return {y: ([r[y]["compute_s"] for r in res], [r[y]["scores"] for r in res])
                for y in ("contiguous", "zigzag")}  # fmt: skip

    def judge(t):
        try:
            got = zigzag_balances_time(t["contiguous"][0], t["zigzag"][0],
                                       t["contiguous"][1], t["zigzag"][1])  # fmt: skip
        except AssertionError as err:
            return "miss", str(err)
        return "pass", f"slowest rank {got['time_ratio']:.2f}x faster zig-zag"

    hint = "a layout that balances nothing misses every try"
    what = "zig-zag's balance in time"
    t = retry(measure, judge, tries=tries, what=what, hint=hint).result
    got = zigzag_balances_time(t["contiguous"][0], t["zigzag"][0],
                               t["contiguous"][1], t["zigzag"][1])  # fmt: skip
    return {"contiguous_s": t["contiguous"][0], "zigzag_s": t["zigzag"][0], **got}


def saved_bytes_match_model(saved, seq_len, hidden, n_heads, bytes_per_value, batch):
    """Check the bytes ring attention kept for backward on each rank.

    Args:
        saved: ``{world_size: bytes one rank kept}``, 1 included.
        seq_len: tokens in the whole sequence.
        hidden: ``heads * head_dim`` (Q, K, V and output alike here).
        n_heads: attention heads.
        bytes_per_value: bytes of one element (the log-sum-exp too).
        batch: sequences in the batch.

    Returns:
        True; raises ``AssertionError`` naming the world size that differs.
    """
    for w, got in saved.items():
        per_seq = ring_saved_bytes_per_rank(
            seq_len, hidden, hidden, n_heads, w, bytes_per_value
        )
        if got != batch * per_seq:
            raise AssertionError(
                f"on {w} ranks one rank kept {got} bytes for backward, the model "
                f"{batch * per_seq:.0f}: it keeps q, k, v, out and the "
                "log-sum-exp of its own shard, no score matrix"
            )
    return True


def _merge_cases():
    gen = torch.Generator().manual_seed(1313)
    q = torch.randn(2, 5, 4, generator=gen, dtype=torch.float64)
    k = torch.randn(2, 9, 4, generator=gen, dtype=torch.float64) * 3
    v = torch.randn(2, 9, 4, generator=gen, dtype=torch.float64)
    return q, k, v


#: The log-sum-exp the float32 case shifts every block's by: scores this large
#: are real (long sequences, large logits), and exp(1000) overflows float32.
LARGE_LSE = 1000.0


def _merge_hint(got, out_a, out_b, label=""):
    if label == "float32 near 1e3" and not torch.isfinite(got).all():
        return (
            f"with log-sum-exp values near {LARGE_LSE:g}, exp overflows float32 "
            "to inf: never exponentiate an lse itself; use logaddexp, or subtract "
            "the larger lse before exp"
        )
    if torch.isnan(got).any():
        return (
            "it has NaN: with an empty first block (lse = -inf) compute the weights "
            "as exp(lse_a - lse), exp(lse_b - lse) with lse = logaddexp(lse_a, lse_b)"
        )
    if torch.allclose(got, (out_a + out_b) / 2):
        return "a plain average ignores how much of the softmax each block holds"
    if torch.allclose(got, out_a + out_b):
        return "each block's output is normalised on its own: weight them, not add"
    return "weight each block by exp(lse_block - logaddexp(lse_a, lse_b))"


def merge_partial_attention(fn) -> bool:
    """Check the exercise: the online-softmax merge of two blocks' attention."""
    name = "merge_partial_attention"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function merge_partial_attention")
    q, k, v = _merge_cases()
    scale = q.shape[-1] ** -0.5
    full, full_lse = block_attention_forward(q, k, v, scale)
    a = block_attention_forward(q, k[:, :4], v[:, :4], scale)
    b = block_attention_forward(q, k[:, 4:], v[:, 4:], scale)
    empty = (torch.zeros_like(full), torch.full_like(full_lse, float("-inf")))

    def large(block):  # float32, every log-sum-exp shifted up: the same softmax
        return block[0].float(), block[1].float() + LARGE_LSE

    wants = {
        "two blocks": (full, full_lse),
        "empty first": a,
        "float32 near 1e3": large((full, full_lse)),
    }
    cases = ((a, b, "two blocks"), (empty, a, "empty first"))
    cases += ((large(a), large(b), "float32 near 1e3"),)
    for first, second, label in cases:
        try:
            got = fn(*first, *second)
        except NotImplementedError:
            return not_attempted(name)
        if not (isinstance(got, tuple) and len(got) == 2):
            raise AssertionError(f"{name}: return a pair (out, lse), got {got!r:.60}")
        out, lse = got
        want = wants[label]
        tol = {"rtol": 1e-4, "atol": 1e-5} if label == "float32 near 1e3" else {}
        if not torch.allclose(out, want[0], **tol):
            hint = _merge_hint(out, first[0], second[0], label)
            raise AssertionError(f"{name} ({label}): the output is wrong; {hint}")
        if not torch.allclose(lse, want[1], **tol):
            raise AssertionError(
                f"{name} ({label}): out is right but lse is not; the merged "
                "log-sum-exp is logaddexp(lse_a, lse_b)"
            )
    return passed(
        name,
        "two blocks merge into attention over all 9 keys, also in float32 with "
        f"log-sum-exp values near {LARGE_LSE:g}",
    )


__all__ = [
    "attention_matches_full",
    "merge_partial_attention",
    "ring_bytes_match_model",
    "saved_bytes_match_model",
    "timed_balance",
    "zigzag_balances_time",
    "zigzag_balances_work",
]
