import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterlab.models.memory import (
    activation_memory_per_layer,
    model_state_bytes_per_param,
    training_memory,
)

GB = 1e9
# Llama 2 70B shape (Touvron et al. 2023).
L70 = dict(n_layers=80, hidden=8192, seq_len=4096, n_heads=64)


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
    full = activation_memory_per_layer(h, s, b, a)
    assert full == pytest.approx(sbh * (34 + 5 * a * s / h))
    tp_only = activation_memory_per_layer(h, s, b, a, tp=t)
    assert tp_only == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    tp_sp = activation_memory_per_layer(h, s, b, a, tp=t, sequence_parallel=True)
    assert tp_sp == pytest.approx(sbh / t * (34 + 5 * a * s / h))
    sel = activation_memory_per_layer(h, s, b, tp=t, recompute="selective")
    assert sel == pytest.approx(sbh * (10 + 24 / t))
    sel_sp = activation_memory_per_layer(
        h, s, b, tp=t, sequence_parallel=True, recompute="selective"
    )
    assert sel_sp == pytest.approx(sbh * 34 / t)
    assert activation_memory_per_layer(h, s, b, recompute="full") == 2 * sbh


def test_1f1b_first_stage_holds_pp_microbatches_of_its_layers():
    per_layer = activation_memory_per_layer(8192, 4096, 2, 64, tp=8)
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
    n=sizes,
    tp=degree,
    pp=degree,
    dp=degree,
    zero=st.integers(0, 3),
    sp=st.booleans(),
    rc=st.sampled_from(["none", "selective", "full"]),
    which=st.sampled_from(["tp", "pp", "dp", "zero"]),
)
def test_more_sharding_never_raises_memory_per_gpu(n, tp, pp, dp, zero, sp, rc, which):
    base = dict(tp=tp, pp=pp, dp=dp, zero_stage=zero, sequence_parallel=sp)
    more = dict(base)
    if which == "zero":
        more["zero_stage"] = min(3, zero + 1)
    else:
        more[which] *= 2
    shape = dict(n_layers=64, hidden=4096, seq_len=2048, n_heads=32, recompute=rc)
    before = training_memory(n, **base, **shape)
    after = training_memory(n, **more, **shape)
    for key in before:
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
        (dict(n_params=1e9, n_layers=2, hidden=8, seq_len=8), "n_heads"),
        (dict(n_params=1e9, recompute="some"), "recompute"),
        (dict(n_params=1e9, schedule="zb"), "schedule"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, word):
    with pytest.raises(ValueError, match=word):
        training_memory(**kwargs)


def test_lora_keeps_frozen_weights_only_and_fits_one_gpu():
    from clusterlab.models.memory import lora_memory

    r = lora_memory(7e9, n_layers=32, hidden=4096, rank=16, seq_len=4096,
                    recompute="selective")  # fmt: skip
    adapters = 32 * 4 * 2 * 16 * 4096
    assert r["trainable_params"] == adapters
    assert r["weights"] == pytest.approx(14e9 + 2 * adapters)
    assert r["optimizer"] == pytest.approx(12 * adapters)
    assert r["total"] < 80 * GB < training_memory(7e9)["total"]
