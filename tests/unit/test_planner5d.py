"""The five-dimensional planner: the 3-D plan as its special case, CP, EP, MoE."""

import dataclasses
import math

import pandas as pd
import pytest

import clusterlab as cl
from clusterlab.models import planner5d as pm
from clusterlab.models.compute import LLAMA2_7B, LLAMA2_70B
from clusterlab.models.planner import plan, recipe_row
from clusterlab.models.planner5d import plan5d, plan5d_row
from clusterlab.models.recipes import ESSAY_70B
from widget_helpers import seconds

DEEPSEEK = "DeepSeek-V3 pre-training"


@pytest.fixture(scope="module")
def deepseek():
    return pm.moe_shape(DEEPSEEK), pm.published_layout(DEEPSEEK)


def test_with_cp_and_ep_1_the_5d_planner_is_the_3d_planner():
    old = plan(LLAMA2_70B, 64, global_batch=64, micro_batch=1)
    new = plan5d(LLAMA2_70B, 64, global_batch=64, micro_batch=1)
    assert len(new) == len(old)
    pd.testing.assert_frame_equal(new[old.columns], old)
    assert (new.cp == 1).all() and (new.ep == 1).all()
    assert (new.cp_comm_s.dropna() == 0).all() and (new.ep_comm_s.dropna() == 0).all()


def test_the_essay_recipe_keeps_its_numbers_in_five_dimensions():
    old = recipe_row(ESSAY_70B)
    new = plan5d_row(
        ESSAY_70B.model, tp=8, pp=4, dp=32, zero_stage=1, recompute="full",
        sequence_parallel=False, global_batch=512, micro_batch=2,
    )  # fmt: skip
    for key, value in old.items():
        if isinstance(value, float) and math.isnan(value):
            assert math.isnan(new[key]), key
        elif not isinstance(value, float):
            assert new[key] == value, key
        else:
            assert new[key] == pytest.approx(value, rel=1e-12), key


def test_context_parallelism_divides_activations_and_sends_keys_and_values():
    kw = dict(tp=8, pp=4, zero_stage=1, recompute="none", sequence_parallel=True,
              global_batch=512, micro_batch=2)  # fmt: skip
    one = plan5d_row(LLAMA2_70B, dp=32, cp=1, **kw)
    two = plan5d_row(LLAMA2_70B, dp=16, cp=2, **kw)
    assert two["activations_bytes"] == pytest.approx(one["activations_bytes"] / 2)
    assert two["tp_allreduce_bytes"] == pytest.approx(one["tp_allreduce_bytes"] / 2)
    assert one["cp_comm_bytes"] == 0 < two["cp_comm_bytes"]
    # ZeRO shards over dp * cp: the optimizer shard is the same with 32 x 1, 16 x 2.
    assert two["optimizer_bytes"] == pytest.approx(one["optimizer_bytes"])
    with pytest.raises(ValueError, match="cp=3"):
        plan5d_row(LLAMA2_70B, dp=32, cp=3, **kw)


def bf16_rate(eff):
    return cl.models.precision.peak_flops("H100 SXM5", "bf16") * eff


def test_precision_sets_the_peak_and_the_state_bytes():
    kw = dict(tp=8, pp=4, dp=32, zero_stage=0, recompute="full",
              sequence_parallel=True, global_batch=512, micro_batch=2)  # fmt: skip
    bf16 = plan5d_row(LLAMA2_70B, **kw)
    fp8 = plan5d_row(LLAMA2_70B, precision="fp8", **kw)
    fp32 = plan5d_row(LLAMA2_70B, precision="fp32", **kw)
    # fp8 prices the linear layers' GEMMs only (6N + 2N recomputed) at the
    # fp8 peak and its measured share; attention stays at bf16's
    n, eff = LLAMA2_70B.n_params, cl.models.planner_comm.matmul_efficiency_of()
    eff8 = cl.models.planner_comm.matmul_efficiency_of("H200 SXM", "fp8")
    gemm_share = 8 * n / (bf16["compute_s"] * bf16_rate(eff) * 1024 / (512 * 4096))
    want = bf16["compute_s"] * (gemm_share * eff / (2 * eff8) + (1 - gemm_share))
    assert fp8["compute_s"] == pytest.approx(want, rel=1e-3)
    assert bf16["compute_s"] / 2 < fp8["compute_s"] < bf16["compute_s"] / 1.5
    same = plan5d_row(LLAMA2_70B, precision="fp8", fp8_matmul_efficiency=eff, **kw)
    assert same["compute_s"] < fp8["compute_s"]  # 0.80 of the peak beats 0.73
    with pytest.raises(ValueError, match="fp8_matmul_efficiency"):
        plan5d_row(LLAMA2_70B, precision="fp8", fp8_matmul_efficiency=0, **kw)
    assert fp32["activations_bytes"] == pytest.approx(2 * bf16["activations_bytes"])
    assert fp32["weights_bytes"] == pytest.approx(2 * bf16["weights_bytes"])
    with pytest.raises(ValueError, match="precision='fp4'"):
        plan5d_row(LLAMA2_70B, precision="fp4", **kw)


def test_bad_arguments_name_themselves(deepseek):
    moe, _ = deepseek
    kw = dict(tp=1, pp=1, zero_stage=1, recompute="none", sequence_parallel=False,
              global_batch=64)  # fmt: skip
    with pytest.raises(ValueError, match="ep=8.*dense"):
        plan5d_row(LLAMA2_7B, dp=8, ep=8, **kw)
    with pytest.raises(ValueError, match="ep=3"):
        plan5d_row(moe, dp=6, ep=3, **kw)
    with pytest.raises(ValueError, match="n_gpus"):
        plan5d(LLAMA2_7B, 0, global_batch=8)
    with pytest.raises(ValueError, match="ep_overlap"):
        plan5d_row(moe, dp=8, ep=8, ep_overlap=2.0, **kw)


def test_moe_experts_are_split_by_ep_and_the_rest_by_tp_pp(deepseek):
    moe, _ = deepseek
    other, experts = pm.split_params(moe)
    assert other + experts == pytest.approx(moe.params_total)
    assert 0.9 < experts / moe.params_total < 1  # nearly all weights are experts
    kw = dict(tp=1, pp=16, dp=128, zero_stage=1, recompute="selective",
              sequence_parallel=False, global_batch=15360, precision="fp8")  # fmt: skip
    r8, r64 = plan5d_row(moe, ep=8, **kw), plan5d_row(moe, ep=64, **kw)
    # ZeRO-1 shards the experts' optimizer state over dp / ep = 16 and 2 ranks.
    for row, ep in ((r8, 8), (r64, 64)):
        per_param = 2 + 2 + 12 / (128 // ep)
        want = experts / (16 * ep) * per_param
        assert row["expert_state_bytes"] == pytest.approx(want)
    assert r8["weights_bytes"] == r64["weights_bytes"]
    assert r64["ep_comm_s"] > r8["ep_comm_s"] > 0  # EP 8 stays inside NVLink
    hidden = plan5d_row(moe, ep=64, ep_overlap=1.0, **kw)
    assert hidden["ep_comm_s"] == 0 and hidden["step_s"] < r64["step_s"]


def test_deepseek_v3_layout_holds_in_the_planner(deepseek):
    moe, layout = deepseek
    check = pm.layout_check(moe, layout)
    assert check["holds"].all(), check
    a = check.attrs
    assert a["reported_tokens_per_s"] < a["hidden_tokens_per_s"]
    # node-limited routing halves what crosses InfiniBand: compute : all-to-all
    # near the report's 1:1 (0.62), where one copy per expert gives 0.32
    assert 0.5 < a["compute_to_comm"] < 1.0


def test_layout_check_fails_an_all_to_all_blind_to_node_limited_routing(deepseek):
    moe, layout = deepseek
    blind = dataclasses.replace(moe, max_nodes_per_token=None)
    check = pm.layout_check(blind, layout)
    assert check.attrs["compute_to_comm"] < 0.5
    assert not check.set_index("statement")["holds"].iloc[-1]


def test_layout_check_fails_when_experts_are_not_split_by_ep(deepseek):
    moe, layout = deepseek
    # A model that counts every layer as dense: the routed experts' weights are
    # split by tp * pp only, never by ep, and the published layout no longer fits.
    wrong = dataclasses.replace(moe, n_dense_layers=moe.n_layers)
    check = pm.layout_check(wrong, layout).set_index("statement")["holds"]
    assert not check["the published layout fits"]


def test_layout_check_fails_when_the_model_has_too_few_experts(deepseek):
    moe, layout = deepseek
    # With 8 experts per layer (and the parameters to match) EP is not needed.
    other, experts = pm.split_params(moe)
    wrong = dataclasses.replace(moe, n_experts=8, params_total=other + experts / 32)
    check = pm.layout_check(wrong, _with(layout, ep=8))
    check = check.set_index("statement")["holds"]
    assert check["the published layout fits"]
    assert not check["without EP it would not fit"]


def _with(layout, **changes):
    out = layout.copy()
    for key, value in changes.items():
        out[key] = value
    return out


def test_layout_check_fails_when_the_speed_model_is_wrong(deepseek):
    moe, layout = deepseek
    # Matmuls at a tenth of their achieved share: even with every all-to-all
    # hidden the planner is slower than the run, which a bound cannot be.
    check = pm.layout_check(
        moe, layout, matmul_efficiency=0.08, fp8_matmul_efficiency=0.07
    )
    holds = check.set_index("statement")["holds"]
    assert not holds[
        "the reported tokens/s is at most the planner's, all-to-alls hidden"
    ]


@pytest.mark.timing
def test_moe_sweep_is_fast_enough_for_a_widget(deepseek):
    moe, _ = deepseek
    knobs = dict(tp_options=(1,), ep_options=(64,), zero_stages=(1,),
                 recompute_modes=("selective",), precisions=("fp8",))  # fmt: skip
    assert seconds(lambda: plan5d(moe, 2048, global_batch=15360, **knobs)) < 1.0
    df = plan5d(moe, 2048, global_batch=15360, **knobs)
    assert df.feasible.any() and (df.ep == 64).all()


def test_state_exercise_check_accepts_the_solution_and_rejects_wrong_ones(capsys):
    import clusterlab as cl

    assert cl.planner.check.state_bytes_per_gpu(cl.planner.answer.state_bytes_per_gpu)
    assert "\u2714" in capsys.readouterr().out

    def stub(dense, experts, **kw):
        raise NotImplementedError

    assert cl.planner.check.state_bytes_per_gpu(stub) is False
    assert "not attempted" in capsys.readouterr().out

    def experts_not_split(dense, experts, *, tp, pp, dp, ep, zero_stage):
        return cl.planner.answer.state_bytes_per_gpu(
            dense, experts, tp=tp, pp=pp, dp=dp, ep=1, zero_stage=zero_stage
        )

    with pytest.raises(AssertionError, match="divide by ep"):
        cl.planner.check.state_bytes_per_gpu(experts_not_split)

    def shards_over_all_replicas(dense, experts, *, tp, pp, dp, ep, zero_stage):
        z = cl.planner.answer.zero_bytes_per_param
        return dense / (tp * pp) * z(zero_stage, dp) + experts / (pp * ep) * z(
            zero_stage, dp
        )

    with pytest.raises(AssertionError, match="dp // ep"):
        cl.planner.check.state_bytes_per_gpu(shards_over_all_replicas)
