"""The long-context lab's checks pass right inputs and fail wrong ones.

Shards come from one process (the whole attention cut up), so no launch is
needed; the ring's own shards are checked in tests/distributed/test_context_parallel.py.
"""

import pytest
import torch

import clusterlab as cl
from clusterlab.long_context.ranks import zigzag_shard
from clusterlab.long_context.workers import reference_attention
from clusterlab.models.context_parallel import (
    cp_kv_bytes_backward_per_rank,
    cp_kv_bytes_per_rank,
)

SHAPE = dict(batch=1, heads=2, seq=16, head_dim=4)
KEYS = ("out", "dq", "dk", "dv")


def _shards(ref, w=4, layout="contiguous"):
    if layout == "zigzag":
        return [{k: zigzag_shard(ref[k], r, w) for k in KEYS} for r in range(w)]
    return [{k: ref[k].chunk(w, dim=2)[r] for k in KEYS} for r in range(w)]


@pytest.fixture(scope="module")
def ref():
    return reference_attention(**SHAPE, causal=True)


@pytest.mark.parametrize("layout", ["contiguous", "zigzag"])
def test_attention_matches_full_passes_true_shards(ref, layout):
    assert cl.long_context.check.attention_matches_full(
        _shards(ref, layout=layout), ref, layout
    )


def test_attention_matches_full_fails_when_a_gradient_is_perturbed(ref):
    shards = _shards(ref)
    shards[2]["dk"] = shards[2]["dk"] + 1e-3
    with pytest.raises(AssertionError, match="k's gradient differs"):
        cl.long_context.check.attention_matches_full(shards, ref)


def test_attention_matches_full_fails_when_the_output_is_not_causal(ref):
    full = reference_attention(**SHAPE, causal=False)
    shards = _shards(ref)
    for s, o in zip(shards, full["out"].chunk(4, dim=2), strict=True):
        s["out"] = o
    with pytest.raises(AssertionError, match="the output differs"):
        cl.long_context.check.attention_matches_full(shards, ref)


def test_attention_matches_full_fails_when_the_layout_is_mistaken(ref):
    with pytest.raises(AssertionError, match="zigzag layout"):
        cl.long_context.check.attention_matches_full(_shards(ref), ref, "zigzag")


def _stats(w, seq=16, kv=8, b=8, batch=1, forward=None):
    fwd = cp_kv_bytes_per_rank(seq, kv, w, b) * batch if forward is None else forward
    bwd = cp_kv_bytes_backward_per_rank(seq, kv, w, b) * batch
    return [dict(forward_bytes=fwd, backward_bytes=bwd) for _ in range(w)]


def test_ring_bytes_match_model_passes_the_models_count():
    assert cl.long_context.check.ring_bytes_match_model(_stats(4, batch=2), 2, 16, 8, 8)


def test_ring_bytes_match_model_fails_when_a_hop_is_missing():
    # A ring that stopped one hop short sent (W - 2) blocks, not W - 1.
    short = 2 * (16 / 4) * 8 * 8 * 2
    with pytest.raises(AssertionError, match="rank 0 of 4 sent 1024.0 bytes"):
        cl.long_context.check.ring_bytes_match_model(
            _stats(4, forward=short), 1, 16, 8, 8
        )


def test_ring_bytes_match_model_fails_when_the_batch_is_forgotten():
    with pytest.raises(AssertionError, match="forward pass"):
        cl.long_context.check.ring_bytes_match_model(_stats(2), 3, 16, 8, 8)


def test_zigzag_balances_work_passes_the_ring_counts():
    # contiguous: (r + 1) blocks of 4 x 4; zig-zag: 2W + 1 blocks of 2 x 2.
    assert cl.long_context.check.zigzag_balances_work(
        [16, 32, 48, 64], [36, 36, 36, 36]
    )


def test_zigzag_balances_work_fails_when_zigzag_is_uneven():
    with pytest.raises(AssertionError, match="zig-zag"):
        cl.long_context.check.zigzag_balances_work([16, 32, 48, 64], [16, 32, 48, 64])


def test_zigzag_balances_work_fails_when_the_mask_was_not_applied():
    # Without the causal mask every rank computes every block: no imbalance.
    with pytest.raises(AssertionError, match="contiguous"):
        cl.long_context.check.zigzag_balances_work([64, 64, 64, 64], [64, 64, 64, 64])


def _saved(w, seq=16, h=8, heads=2, b=8):
    return (4 * h + heads) * (seq // w) * b


def test_saved_bytes_match_model_passes_the_models_count():
    saved = {w: 2 * _saved(w) for w in (1, 2, 4)}
    assert cl.long_context.check.saved_bytes_match_model(saved, 16, 8, 2, 8, 2)


def test_saved_bytes_match_model_fails_when_scores_are_kept():
    scores = 2 * 16 * (16 // 2) * 8  # heads x s x s/W scores of 8 bytes
    with pytest.raises(AssertionError, match="on 2 ranks"):
        cl.long_context.check.saved_bytes_match_model(
            {2: _saved(2) + scores}, 16, 8, 2, 8, 1
        )


def test_saved_bytes_match_model_fails_when_memory_does_not_fall_with_ranks():
    with pytest.raises(AssertionError, match="on 4 ranks"):
        cl.long_context.check.saved_bytes_match_model(
            {1: _saved(1), 4: _saved(1)}, 16, 8, 2, 8, 1
        )


# --- the exercise -----------------------------------------------------------


def test_the_reference_solution_passes(capsys):
    assert cl.long_context.check.merge_partial_attention(
        cl.long_context.answer.merge_partial_attention
    )
    assert "\u2714 merge_partial_attention" in capsys.readouterr().out


def test_a_stub_is_not_attempted(capsys):
    def stub(out_a, lse_a, out_b, lse_b):
        raise NotImplementedError

    assert cl.long_context.check.merge_partial_attention(stub) is False
    assert "not attempted" in capsys.readouterr().out


def test_merge_fails_when_it_averages_the_blocks():
    def average(out_a, lse_a, out_b, lse_b):
        return (out_a + out_b) / 2, torch.logaddexp(lse_a, lse_b)

    with pytest.raises(AssertionError, match="plain average"):
        cl.long_context.check.merge_partial_attention(average)


def test_merge_fails_when_the_lse_is_summed():
    def summed(out_a, lse_a, out_b, lse_b):
        out, _ = cl.long_context.answer.merge_partial_attention(
            out_a, lse_a, out_b, lse_b
        )
        return out, lse_a + lse_b

    with pytest.raises(AssertionError, match="lse is not"):
        cl.long_context.check.merge_partial_attention(summed)


def test_merge_fails_when_an_empty_block_gives_nan():
    def unsafe(out_a, lse_a, out_b, lse_b):
        m = torch.maximum(lse_a, lse_b)
        wa, wb = torch.exp(lse_a - m), torch.exp(lse_b - m)
        wa = torch.where(torch.isinf(lse_a), torch.nan, wa)  # -inf - -inf
        out = (wa[..., None] * out_a + wb[..., None] * out_b) / (wa + wb)[..., None]
        return out, m + torch.log(wa + wb)

    with pytest.raises(AssertionError, match="NaN"):
        cl.long_context.check.merge_partial_attention(unsafe)


def test_merge_fails_when_it_exponentiates_the_log_sum_exps():
    # right in float64 at small scores; in float32 near 1e3 exp overflows
    def unstable(out_a, lse_a, out_b, lse_b):
        ea, eb = torch.exp(lse_a), torch.exp(lse_b)
        lse = torch.log(ea + eb)
        return (ea[..., None] * out_a + eb[..., None] * out_b) / (ea + eb)[
            ..., None
        ], lse

    with pytest.raises(AssertionError, match="float32 near 1e3.*exp overflows"):
        cl.long_context.check.merge_partial_attention(unstable)


def test_merge_check_refuses_a_non_function():
    with pytest.raises(ValueError, match="fn=3"):
        cl.long_context.check.merge_partial_attention(3)
