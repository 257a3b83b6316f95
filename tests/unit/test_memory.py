import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterlab.models.activations import activation_memory_per_layer
from clusterlab.models.compute import GPT3_175B, LLAMA2_7B, LLAMA2_13B, LLAMA2_70B
from clusterlab.models.memory import (
    MEMORY_KEYS,
    model_memory,
    model_state_bytes_per_param,
    training_memory,
)
from clusterlab.models.pipeline import (
    in_flight_microbatches,
    peak_in_flight,
    simulate_schedule,
)

GB = 1e9
# Llama 2 70B shape (Touvron et al. 2023), counted with Korthikanti's GPT layer.
L70 = dict(n_layers=80, hidden=8192, seq_len=4096, n_heads=64, formula="korthikanti")


def test_mixed_precision_adam_is_16_bytes_per_parameter():
    r = training_memory(7e9)
    assert r["weights"] == 14e9 and r["grads"] == 14e9 and r["optimizer"] == 84e9
    assert r["activations"] == 0 and r["total"] == 112e9


def test_zero_stages_shard_one_more_kind_each():
    # Hand-computed per parameter with 64 replicas (ZeRO paper, Figure 1).
    assert model_state_bytes_per_param(0, 64) == 16
    assert model_state_bytes_per_param(1, 64) == pytest.approx(4 + 12 / 64)
    assert model_state_bytes_per_param(2, 64) == pytest.approx(2 + 14 / 64)
    assert model_state_bytes_per_param(3, 64) == pytest.approx(16 / 64)
    r = training_memory(7.5e9, dp=64, zero_stage=3)
    assert r["total"] == pytest.approx(7.5e9 * 16 / 64)


def test_tp_and_pp_divide_the_model_state():
    r = training_memory(70e9, tp=8, pp=4)
    assert r["weights"] == pytest.approx(70e9 * 2 / 32)
    assert r["total"] == pytest.approx(70e9 * 16 / 32)


def test_fp32_fsdp_with_torch_adam_is_16_bytes_sharded():
    r = training_memory(
        1e6, dp=4, zero_stage=3, weight_bytes=4, grad_bytes=4, optimizer_bytes=8
    )
    assert r["weights"] == 1e6 and r["grads"] == 1e6 and r["optimizer"] == 2e6
    assert r["total"] == 4e6


def test_activations_match_korthikanti_table_2():
    s, b, h, a, t = 2048, 1, 12288, 96, 8  # GPT-3 175B shape from the paper
    sbh = s * b * h
    k = dict(formula="korthikanti")
    full = activation_memory_per_layer(h, s, b, a, **k)
    assert full == pytest.approx(sbh * (34 + 5 * a * s / h))
    tp_only = activation_memory_per_layer(h, s, b, a, tp=t, **k)
    assert tp_only == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    tp_sp = activation_memory_per_layer(h, s, b, a, tp=t, sequence_parallel=True, **k)
    assert tp_sp == pytest.approx(sbh / t * (34 + 5 * a * s / h))
    sel = activation_memory_per_layer(h, s, b, tp=t, recompute="selective", **k)
    assert sel == pytest.approx(sbh * (10 + 24 / t))
    sel_sp = activation_memory_per_layer(
        h, s, b, tp=t, sequence_parallel=True, recompute="selective", **k
    )
    assert sel_sp == pytest.approx(sbh * 34 / t)
    assert activation_memory_per_layer(h, s, b, recompute="full") == 2 * sbh


def test_1f1b_first_stage_holds_pp_microbatches_of_its_layers():
    per_layer = activation_memory_per_layer(
        8192, 4096, 2, 64, tp=8, formula="korthikanti"
    )
    r = training_memory(70e9, tp=8, pp=4, micro_batch=2, **L70)
    assert r["activations"] == pytest.approx(per_layer * 20 * 4)
    few = training_memory(70e9, tp=8, pp=4, micro_batch=2, microbatches=2, **L70)
    assert few["activations"] == pytest.approx(per_layer * 20 * 2)
    gp = training_memory(
        70e9, tp=8, pp=4, micro_batch=2, microbatches=8, schedule="gpipe", **L70
    )
    assert gp["activations"] == pytest.approx(per_layer * 20 * 8)


def test_70b_recipe_hand_computed():
    # TP8 x PP4, micro-batch 2, no SP, no recompute: the activations dominate.
    r = training_memory(70e9, tp=8, pp=4, dp=32, micro_batch=2, **L70)
    sbh = 4096 * 2 * 8192
    act = sbh * (10 + 24 / 8 + 5 * 64 * 4096 / (8192 * 8)) * 20 * 4
    assert r["activations"] == pytest.approx(act)
    assert r["total"] > 80 * GB
    r = training_memory(
        70e9, tp=8, pp=4, dp=32, micro_batch=2, zero_stage=1,
        sequence_parallel=True, recompute="selective", **L70,
    )  # fmt: skip
    assert r["total"] < 80 * GB


sizes = st.floats(1e6, 1e12)
degree = st.sampled_from([1, 2, 4, 8, 16])


@given(
    scale=st.floats(1.0, 1.5),
    tp=degree,
    pp=degree,
    dp=degree,
    zero=st.integers(0, 3),
    sp=st.booleans(),
    rc=st.sampled_from(["none", "selective", "full"]),
    formula=st.sampled_from(["flash", "korthikanti"]),
    which=st.sampled_from(["tp", "pp", "dp", "zero"]),
)
def test_more_sharding_never_raises_memory_per_gpu(
    scale, tp, pp, dp, zero, sp, rc, formula, which
):
    base = dict(tp=tp, pp=pp, dp=dp, zero_stage=zero, sequence_parallel=sp)
    more = dict(base)
    if which == "zero":
        more["zero_stage"] = min(3, zero + 1)
    else:
        more[which] *= 2
    shape = dict(n_layers=64, hidden=4096, seq_len=2048, n_heads=32, recompute=rc)
    shape.update(vocab=32000, formula=formula)
    n = scale * 64 * 12 * 4096**2  # a model as large as its layers (or larger)
    before = training_memory(n, **base, **shape)
    after = training_memory(n, **more, **shape)
    # ZeRO-3's gathered layers appear when it starts to shard; all else shrinks.
    # The total holds them too: at dp = 2 a gathered layer can outweigh the half
    # of the weights that stage 3 saves (pp 16, 64 layers), so it is compared
    # without them.
    gathered = ("gathered_weights", "gathered_grads")
    for r in (before, after):
        r["total"] -= sum(r[k] for k in gathered)
    for key in set(MEMORY_KEYS) - set(gathered):
        assert after[key] <= before[key] * (1 + 1e-12), (key, base, more)


@given(n=sizes, rc_pair=st.sampled_from([("none", "selective"), ("selective", "full")]))
def test_more_recomputation_never_raises_memory(n, rc_pair):
    shape = dict(n_layers=32, hidden=4096, seq_len=4096, n_heads=32, tp=4)
    lo, hi = (training_memory(n, recompute=r, **shape)["total"] for r in rc_pair)
    assert hi <= lo


@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(n_params=0), "n_params"),
        (dict(n_params=1e9, tp=0), "tp"),
        (dict(n_params=1e9, zero_stage=4), "zero_stage"),
        (dict(n_params=1e9, weight_bytes=-1), "weight_bytes"),
        (dict(n_params=1e9, n_layers=32), "seq_len"),
        (
            dict(n_params=1e9, n_layers=2, hidden=8, seq_len=8, formula="korthikanti"),
            "n_heads",
        ),
        (dict(n_params=1e9, n_layers=2, hidden=8, seq_len=8, n_kv_heads=2), "n_heads"),
        (dict(n_params=1e9, n_layers=2, hidden=8, seq_len=8, formula="x"), "formula"),
        (dict(n_params=1e9, n_layers=2, hidden=8, seq_len=8, mlp="relu"), "mlp"),
        (dict(n_params=1e9, n_layers=2, hidden=8, seq_len=8, vocab=0), "vocab"),
        (
            dict(
                n_params=1e9,
                n_layers=2,
                hidden=8,
                seq_len=8,
                pp=4,
                microbatches=6,
                interleave=2,
            ),
            "multiple",
        ),  # fmt: skip
        (dict(n_params=1e9, recompute="some"), "recompute"),
        (dict(n_params=1e9, schedule="zb"), "schedule"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, word):
    with pytest.raises(ValueError, match=word):
        training_memory(**kwargs)


def test_lora_keeps_frozen_weights_only_and_fits_one_gpu():
    from clusterlab.models.lora import lora_memory

    r = lora_memory(7e9, n_layers=32, hidden=4096, rank=16, seq_len=4096,
                    recompute="selective")  # fmt: skip
    adapters = 32 * 4 * 2 * 16 * 4096
    assert r["trainable_params"] == adapters
    assert r["weights"] == pytest.approx(14e9 + 2 * adapters)
    assert r["optimizer"] == pytest.approx(12 * adapters)
    assert r["total"] < 80 * GB < training_memory(7e9)["total"]


def test_flash_case_matches_the_figures_readers_meet():
    # Llama 2 at 4,096 tokens, one sequence, no recomputation: about 18, 28 and
    # 91 GB with FlashAttention and no dropout (34 sbh per layer, no scores).
    want = {LLAMA2_7B: 18e9, LLAMA2_13B: 28e9, LLAMA2_70B: 91e9}
    for model, gb in want.items():
        act = model_memory(model, dp=64, zero_stage=3)["activations"]
        assert act == pytest.approx(gb, rel=0.05), model.name
        gpt = model_memory(model, dp=64, zero_stage=3, formula="korthikanti")
        assert gpt["activations"] > 5 * act  # the s x s scores dominate


def test_flash_formula_by_hand_for_a_gpt_layer_and_llama_70b():
    s, b, h = 2048, 1, 12288
    sbh = s * b * h
    # GPT layer: Korthikanti's 34 sbh less two 1-byte dropout masks.
    assert activation_memory_per_layer(h, s, b, 96) == 32 * sbh
    assert activation_memory_per_layer(h, s, b, 96, tp=8) == pytest.approx(
        sbh * (8 + 24 / 8)
    )
    # Llama 2 70B: GQA 8 of 64 heads, SwiGLU 28672 wide.
    h, f, s = 8192, 28672, 4096
    got = activation_memory_per_layer(
        h, s, 1, 64, n_kv_heads=8, ffn_hidden=f, mlp="swiglu"
    )
    assert got == pytest.approx(s * h * (12 + 4 * 8 / 64) + 6 * s * f)
    # Selective recomputation changes nothing: FlashAttention keeps no scores.
    sel = activation_memory_per_layer(
        h, s, 1, 64, n_kv_heads=8, ffn_hidden=f, mlp="swiglu", recompute="selective"
    )
    assert sel == got


def test_gpt3_zero3_over_1024_gpus_holds_gathered_layers_under_their_own_keys():
    h = GPT3_175B.hidden
    one_layer_bf16 = 2 * 12 * h**2  # 12 h^2 parameters (4h^2 + 8h^2), 2 bytes
    r = model_memory(GPT3_175B, dp=1024, zero_stage=3, recompute="full")
    assert set(r) == set(MEMORY_KEYS)
    assert r["gathered_weights"] == pytest.approx(2 * one_layer_bf16)  # prefetch
    assert r["gathered_grads"] == pytest.approx(one_layer_bf16)
    no_prefetch = model_memory(
        GPT3_175B, dp=1024, zero_stage=3, recompute="full", prefetch=False
    )
    assert no_prefetch["gathered_weights"] == pytest.approx(one_layer_bf16)
    # Full recomputation rebuilds one layer (32 sbh, flash) during backward.
    sbh = GPT3_175B.seq_len * h
    assert r["recompute_buffer"] == pytest.approx(32 * sbh)
    # fp32 logits and their gradient: 2 x s x vocab x 4 bytes.
    assert r["logits"] == pytest.approx(2 * 2048 * 50257 * 4)
    state = r["weights"] + r["grads"] + r["optimizer"]
    assert state == pytest.approx(16 * 175e9 / 1024)
    parts = state + sum(r[k] for k in MEMORY_KEYS[3:-1]) - r["last_stage_activations"]
    assert r["total"] == pytest.approx(parts)  # pp = 1: everything adds up
    assert r["total"] > 10 * GB  # the buffers alone are 10.9 GB: not "under 10"


def test_model_state_callers_get_no_buffers_without_a_shape():
    r = training_memory(1e6, dp=4, zero_stage=3, weight_bytes=4, grad_bytes=4,
                        optimizer_bytes=8)  # fmt: skip
    assert r["gathered_weights"] == r["gathered_grads"] == r["logits"] == 0
    assert r["total"] == 16 * 1e6 / 4


def test_the_peak_is_the_busier_of_the_first_and_last_stage():
    kw = dict(tp=8, pp=4, dp=32, micro_batch=2, microbatches=8, recompute="full")
    r = model_memory(LLAMA2_70B, **kw)
    state = r["weights"] + r["grads"] + r["optimizer"] + r["recompute_buffer"]
    first = state + r["activations"]
    last = state + r["last_stage_activations"] + r["logits"]
    assert r["activations"] == pytest.approx(4 * r["last_stage_activations"])
    assert r["total"] == pytest.approx(max(first, last))


@pytest.mark.parametrize("p, v", [(2, 2), (4, 2), (4, 5), (8, 3)])
def test_interleaving_first_stage_holds_p_plus_p_minus_1_over_v(p, v):
    m = 4 * p
    assert in_flight_microbatches(p, m, interleave=v) == pytest.approx(p + (p - 1) / v)
    simulated = peak_in_flight(simulate_schedule(p, m, "1f1b", interleave=v))
    for stage in range(p):
        want = in_flight_microbatches(p, m, interleave=v, stage=stage)
        assert simulated[stage] == pytest.approx(want)
    plain = training_memory(70e9, pp=p, microbatches=m, **L70)
    inter = training_memory(70e9, pp=p, microbatches=m, interleave=v, **L70)
    ratio = inter["activations"] / plain["activations"]
    assert ratio == pytest.approx(1 + (p - 1) / (p * v))


def test_interleaving_needs_m_a_multiple_of_p():
    with pytest.raises(ValueError, match="microbatches=6 must be a multiple"):
        in_flight_microbatches(4, 6, interleave=2)
    with pytest.raises(ValueError, match="multiple"):
        training_memory(70e9, pp=4, microbatches=6, interleave=2, **L70)
