"""Context parallelism's models, its blockwise attention, layouts and charts.

The ring on real ranks is in tests/distributed/test_context_parallel.py; here
everything that runs in one process.
"""

import json

import pytest
import torch
import torch.nn.functional as F

import clusterlab as cl
from clusterlab.long_context.blocks import (
    block_attention_backward,
    block_attention_forward,
    block_pairs,
    merge_partial_attention,
)
from clusterlab.long_context.ranks import (
    chunk_ids,
    ring_attention,
    ulysses_attention,
    zigzag_shard,
    zigzag_unshard,
)
from clusterlab.models import context_parallel as cpm
from clusterlab.models import long_context as lcm
from clusterlab.models.compute import LLAMA2_7B, LLAMA2_70B

# --- the cost model the planner imports ------------------------------------


def test_ring_forward_bytes_by_hand():
    # 128K tokens on 8 ranks, K and V 1024 wide in bf16: 16K tokens a block,
    # 2 * 16384 * 1024 * 2 B = 64 MiB a hop, 7 hops.
    assert cpm.cp_kv_bytes_per_rank(131072, 1024, 8, 2) == 7 * 2 * 16384 * 1024 * 2


def test_ring_bytes_tend_to_the_whole_sequences_k_and_v():
    whole = 2 * 65536 * 512 * 2.0
    assert cpm.cp_kv_bytes_per_rank(65536, 512, 1, 2) == 0
    assert cpm.cp_kv_bytes_per_rank(65536, 512, 2, 2) == whole / 2
    assert cpm.cp_kv_bytes_per_rank(65536, 512, 1024, 2) == pytest.approx(whole, 1e-3)


def test_backward_sends_about_twice_the_forward():
    fwd = cpm.cp_kv_bytes_per_rank(4096, 256, 4, 2)
    bwd = cpm.cp_kv_bytes_backward_per_rank(4096, 256, 4, 2)
    # K, V three hops again, dK, dV four hops (the last one home).
    assert bwd == fwd + fwd * 4 / 3
    assert cpm.cp_kv_bytes_backward_per_rank(4096, 256, 1, 2) == 0
    fp32 = cpm.cp_kv_bytes_backward_per_rank(4096, 256, 4, 2, grad_bytes_per_value=4)
    assert fp32 == fwd + 2 * fwd * 4 / 3


def test_ulysses_per_rank_traffic_falls_with_ranks_ring_does_not():
    u2, u8 = (cpm.ulysses_bytes_per_rank(32768, 4096, 4096, d, 2) for d in (2, 8))
    r2, r8 = (cpm.cp_kv_bytes_per_rank(32768, 4096, d, 2) for d in (2, 8))
    assert u8 < u2 / 2 and r8 > r2
    # Ulysses: 4 tensors, each (s/d)(d-1)/d of h values: d = 2 sends s h bytes.
    assert u2 == 4 * 4096 * (32768 / 2) * (1 / 2) * 2
    assert cpm.tp_sp_bytes_per_rank(1024, 64, 4, 2) == 4 * 1024 * 64 * 0.75 * 2


def test_overlap_threshold_is_flops_over_bandwidth():
    # h = kv, 2-byte values: c >= flops / bandwidth tokens (Liu et al.).
    assert cpm.ring_overlap_min_tokens(64, 64, 1e15, 1e11) == pytest.approx(1e4)
    gqa = cpm.ring_overlap_min_tokens(8192, 1024, 1e15, 1e11)
    assert gqa == pytest.approx(1e4 / 8)
    causal = cpm.ring_overlap_min_tokens(64, 64, 1e15, 1e11, causal=True)
    assert causal == pytest.approx(2e4)


def test_activation_memory_falls_as_one_over_cp():
    one = cpm.cp_activation_bytes_per_rank(LLAMA2_7B, 131072)
    eight = cpm.cp_activation_bytes_per_rank(LLAMA2_7B, 131072, 8)
    assert eight == pytest.approx(one / 8)
    per_layer = cl.models.activations.activation_memory_per_layer(
        4096, 131072, 1, 32, n_kv_heads=32, ffn_hidden=11008, mlp="swiglu"
    )
    assert one == 32 * per_layer
    # 128K tokens of a 7B model keep far more than one 80 GB GPU holds.
    assert one > 6 * cl.models.compute.gpu_spec("H100 SXM5").memory_bytes


def test_saved_bytes_keep_no_score_matrix():
    got = cpm.ring_saved_bytes_per_rank(1024, 64, 16, 4, 2, 2, lse_bytes_per_value=4)
    assert got == (2 * 64 + 2 * 16) * 512 * 2 + 4 * 512 * 4


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: cpm.cp_kv_bytes_per_rank(0, 64, 2, 2), "seq_len=0"),
        (lambda: cpm.cp_kv_bytes_per_rank(64, 64, 0, 2), "cp=0"),
        (lambda: cpm.cp_kv_bytes_per_rank(64, 1.5, 2, 2), "kv_hidden=1.5"),
        (lambda: cpm.cp_kv_bytes_per_rank(64, 64, 2, 0), "bytes_per_value=0"),
        (lambda: cpm.ring_overlap_min_tokens(64, 64, 1e15, 0), "link_Bps=0"),
        (lambda: cpm.cp_activation_bytes_per_rank(LLAMA2_7B, 100, 3), "cp=3"),
        (lambda: lcm.long_context_time_sweep(degree=1), "degree=1"),
        (lambda: lcm.long_context_time_sweep(links=("moon",)), "link='moon'"),
    ],
)
def test_bad_model_arguments_are_named(call, name):
    with pytest.raises(ValueError, match=name.replace("(", r"\(")):
        call()


def test_time_sweep_ring_hides_its_traffic_at_long_sequences():
    df = lcm.long_context_time_sweep(LLAMA2_70B, seq_lens=(4096, 131072))
    at = df.set_index(["method", "where", "seq_len"])["exposed_share"]
    ib = "across nodes (InfiniBand NDR)"
    assert at["ring attention", ib, 131072] == 0
    assert at["TP + SP", ib, 131072] > 0.3
    assert at["ring attention", ib, 4096] > 0
    assert (df.exposed_share.between(0, 1)).all()


def test_sweeps_have_their_columns():
    mem = lcm.long_context_memory_sweep()
    assert set(mem.cp) == {1, 2, 4, 8, 16} and (mem.hbm_bytes > 0).all()
    comm = lcm.long_context_comm_sweep()
    assert set(comm.method) == {"ring attention", "Ulysses", "TP + SP"}


# --- blockwise attention and the online softmax ----------------------------


def _qkv(n=10, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(2, 3, n, 4, generator=gen, dtype=torch.float64) for _ in "qkv"]


def test_merging_key_blocks_equals_attention_over_all_keys():
    q, k, v = _qkv()
    scale = 4**-0.5
    out = torch.zeros_like(q)
    lse = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype)
    for ks, vs in zip(k.split(3, dim=2), v.split(3, dim=2), strict=True):
        out, lse = merge_partial_attention(
            out, lse, *block_attention_forward(q, ks, vs, scale)
        )
    assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v))
    assert cl.long_context.answer.merge_partial_attention(out, lse, out, lse)[
        0
    ].allclose(out)


def test_block_backward_equals_autograd_on_a_diagonal_block():
    q, k, v = (t.requires_grad_() for t in _qkv(6, seed=1))
    dout = _qkv(6, seed=2)[0]
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    (out * dout).sum().backward()
    with torch.no_grad():
        _, lse = block_attention_forward(q, k, v, 0.5, diagonal=True)
        delta = (dout * out).sum(-1)
        got = block_attention_backward(q, k, v, dout, lse, delta, 0.5, True)
    for g, t in zip(got, (q, k, v), strict=True):
        assert torch.allclose(g, t.grad)


def test_block_pairs_skip_the_future():
    assert block_pairs([1], [0], causal=True) == [(0, 0, False)]
    assert block_pairs([1], [1], causal=True) == [(0, 0, True)]
    assert block_pairs([0], [1], causal=True) == []
    assert block_pairs([0, 3], [1, 2], causal=True) == [(1, 0, False), (1, 1, False)]
    assert len(block_pairs([0, 3], [1, 2], causal=False)) == 4


def test_zigzag_chunks_and_round_trip():
    assert chunk_ids(1, 4, "zigzag") == [1, 6]
    x = torch.arange(2 * 3 * 16).reshape(1, 2, 16, 3)
    shards = [zigzag_shard(x, r, 4) for r in range(4)]
    assert shards[0][0, 0, :, 0].tolist() == [0, 3, 42, 45]
    assert torch.equal(zigzag_unshard(shards), x)
    with pytest.raises(ValueError, match=r"x.shape\[2\]=16 .* 2 \* world_size = 10"):
        zigzag_shard(x, 0, 5)


def _t(*shape):
    return torch.zeros(*shape)


@pytest.mark.parametrize(
    "args, kwargs, pattern",
    [
        ((_t(2, 4, 8), _t(2, 4, 8), _t(2, 4, 8)), {}, r"q has shape \(2, 4, 8\)"),
        ((_t(1, 2, 4, 8), _t(1, 2, 6, 8), _t(1, 2, 4, 8)), {}, r"k.shape=\(1, 2, 6"),
        ((_t(1, 2, 4, 8), _t(1, 2, 4, 8), "v"), {}, "v has shape str"),
        ((_t(1, 2, 3, 8),) * 3, {"layout": "zigzag"}, r"q.shape\[2\]=3 must be even"),
        ((_t(1, 2, 4, 8),) * 3, {"layout": "spiral"}, "layout='spiral'"),
    ],
)
def test_bad_shapes_are_refused_before_any_message(args, kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        ring_attention(*args, **kwargs)


def test_ulysses_refuses_bad_shapes_before_any_message():
    with pytest.raises(ValueError, match="v.shape="):
        ulysses_attention(_t(1, 2, 4, 8), _t(1, 2, 4, 8), _t(1, 2, 4, 4))


# --- charts and the widget --------------------------------------------------


def test_charts_draw_small_and_refuse_missing_columns():
    charts = [
        cl.long_context.chart.cp_time_chart(lcm.long_context_time_sweep()),
        cl.long_context.chart.cp_memory_chart(lcm.long_context_memory_sweep()),
    ]
    for chart in charts:
        assert len(json.dumps(chart.to_dict())) < 50_000
    with pytest.raises(ValueError, match="exposed_share"):
        cl.long_context.chart.cp_time_chart(lcm.long_context_comm_sweep())


def test_the_widget_redraws_for_its_controls():
    box = cl.long_context.widget.cp_time_widget()
    before = box.children[1].value
    box.children[0].children[1].value = 32
    assert box.children[1].value != before
    with pytest.raises(ValueError, match="model='GPT-5'"):
        cl.long_context.widget.cp_time_widget(model="GPT-5")


def test_time_sweep_hides_the_ring_exactly_from_the_overlap_threshold():
    df = lcm.long_context_time_sweep(LLAMA2_7B, degree=8)
    ring = df[(df.method == "ring attention")]
    sustained = cl.models.compute.H100_SXM.peak_flops * cl.published.value(
        "step_assumptions", "value_fraction", quantity="mfu"
    )
    for where, name in lcm.LONG_CONTEXT_LINKS.items():
        rate = cl.models.links.LINKS[name].effective_Bps
        c = cpm.ring_overlap_min_tokens(4096, 4096, sustained, rate, causal=True)
        rows = ring[ring["where"] == where]
        hidden = rows.seq_len / 8 >= c
        assert ((rows.exposed_s == 0) == hidden).all()
        assert hidden.any() and not hidden.all()


def test_allgather_cp_sends_what_the_ring_sends_but_holds_the_whole_kv():
    from clusterlab.models.context_parallel import (
        allgather_cp_per_rank,
        cp_kv_bytes_per_rank,
    )

    # Llama 3 70B at 128K on 16 ranks: 8 key-value heads of 128, bf16
    got = allgather_cp_per_rank(131072, 1024, 16, 2, link_Bps=50e9)
    assert got["sent_bytes"] == cp_kv_bytes_per_rank(131072, 1024, 16, 2)
    assert got["held_kv_bytes"] == 2 * 131072 * 1024 * 2  # 512 MiB per layer
    assert got["exposed_s"] == pytest.approx(got["sent_bytes"] / 50e9)
    assert "exposed_s" not in allgather_cp_per_rank(1024, 64, 1, 2)
    assert allgather_cp_per_rank(1024, 64, 1, 2)["sent_bytes"] == 0
    with pytest.raises(ValueError, match="link_Bps"):
        allgather_cp_per_rank(1024, 64, 2, 2, link_Bps=0)
