"""Serving on a cluster, the closed forms and the checks: the cost per million
tokens at a latency target, the all-reduce and KV-transfer models, and every
check of the lab fed a wrong input."""

import math

import pandas as pd
import pytest

import clusterlab as cl
from clusterlab.models import serving as m
from clusterlab.serving_cluster import check

ROOF = dict(weight_bytes=16e9, flops_per_token=1.6e10, bandwidth_Bps=3.35e12,
            peak_flops=9.9e14)  # fmt: skip


def test_cost_per_million_tokens_is_price_over_tokens():
    assert m.cost_per_million_tokens(1e6 / 3600, 2.0) == pytest.approx(2.0)
    assert m.cost_per_million_tokens(2000, 4.0) == pytest.approx(
        2 * m.cost_per_million_tokens(2000, 2.0)
    )


def test_serving_cost_takes_the_largest_batch_under_the_target():
    r = m.serving_cost(0.02, price_per_hour=4.0, **ROOF)
    assert m.decode_step_s(r["batch"], **ROOF) <= 0.02
    assert m.decode_step_s(r["batch"] + 1, **ROOF) > 0.02
    looser = m.serving_cost(0.05, price_per_hour=4.0, **ROOF)
    assert looser["batch"] >= r["batch"]
    assert looser["usd_per_million"] <= r["usd_per_million"]


def test_a_target_below_one_step_cannot_be_met():
    r = m.serving_cost(1e-4, price_per_hour=4.0, **ROOF)
    assert r["batch"] == 0 and math.isinf(r["usd_per_million"])


def test_memory_caps_the_batch():
    free = m.serving_cost(0.05, price_per_hour=4.0, **ROOF)
    capped = m.serving_cost(0.05, price_per_hour=4.0, memory_bytes=16e9 + 10 * 2e8,
                            kv_bytes_per_request=2e8, **ROOF)  # fmt: skip
    assert capped["batch"] == 10 < free["batch"]


def test_the_cost_table_puts_the_gpu_far_below_the_cpu_per_token():
    t = m.serving_cost_table("Llama 3 8B", targets_s=(0.05, 1.0))
    gpu = t[t.machine.str.startswith("H100")].set_index("target_s")
    cpu = t[t.machine.str.contains("CPU")].set_index("target_s")
    assert math.isinf(cpu.usd_per_million[0.05])  # the CPU cannot meet 50 ms
    assert cpu.usd_per_million[1.0] > 10 * gpu.usd_per_million[1.0]


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(target_s_per_token=0.0), "target_s_per_token"),
        (dict(price_per_hour=-1.0), "price_per_hour"),
        (dict(max_batch=0), "max_batch"),
    ],
)
def test_serving_cost_names_a_bad_argument(kw, name):
    args = dict(target_s_per_token=0.05, price_per_hour=4.0, **ROOF) | kw
    target = args.pop("target_s_per_token")
    with pytest.raises(ValueError, match=name):
        m.serving_cost(target, **args)


def test_the_tp_allreduce_is_latency_bound_on_nvlink_and_costlier_on_a_network():
    nv = m.tp_comm_per_step_s(8192, 1, 80, 8, "NVLink 4")
    ib = m.tp_comm_per_step_s(8192, 1, 80, 8, "NDR400 InfiniBand")
    assert nv["nbytes"] == 8192 * 2
    assert nv["latency_s"] / nv["allreduce_s"] > 0.9
    assert ib["step_s"] > nv["step_s"]
    big = m.tp_comm_per_step_s(8192, 256, 80, 8, "100GbE TCP")
    assert big["latency_s"] / big["allreduce_s"] < 0.5  # bandwidth shows at last
    with pytest.raises(ValueError, match="tp=0"):
        m.tp_comm_per_step_s(8192, 1, 80, 0, "NVLink 4")


def test_disaggregation_frees_decoding_and_pays_in_the_transfer():
    kv = m.kv_bytes_per_token(80, 8, 128)
    r = m.disagg_latency(2048, 2.0, 1e-5, 0.03, kv, "NDR400 InfiniBand")
    assert r["itl_disagg_s"] < r["itl_colocated_s"]
    assert r["ttft_disagg_s"] == pytest.approx(r["ttft_colocated_s"] + r["transfer_s"])
    assert r["transfer_s"] == pytest.approx(5e-6 + 2048 * kv / 4e10)
    full = m.disagg_latency(2048, 100.0, 1e-5, 0.03, kv, "NVLink 4")
    assert math.isinf(full["itl_colocated_s"])
    with pytest.raises(ValueError, match="rate_per_s"):
        m.disagg_latency(2048, -1.0, 1e-5, 0.03, kv, "NVLink 4")


def _allreduce_table(alpha=150e-6, beta=3e9):
    sizes = [512.0, 2048.0, 8192.0, 32768.0, 2.0**20, 2.0**22]
    t = pd.DataFrame({"size_bytes": sizes})
    t["kind"] = ["decode"] * 4 + ["large"] * 2
    t["time_s"] = alpha + t.size_bytes / beta
    t["model_time_s"] = t.time_s * 1.1
    return t


def test_the_allreduce_check_passes_a_latency_aware_model():
    ok, text = check.allreduce_latency_bound(_allreduce_table())
    assert ok, text


def test_the_allreduce_check_fails_a_model_blind_to_latency():
    t = _allreduce_table()
    ok, text = check.allreduce_latency_bound(t.assign(model_time_s=t.size_bytes / 3e9))
    assert not ok and "latency" in text


def test_the_allreduce_check_fails_a_bandwidth_bound_run():
    t = _allreduce_table(alpha=1e-7, beta=1e8)  # a slow link: time grows with size
    ok, text = check.allreduce_latency_bound(t)
    assert not ok and "not latency-bound" in text


def test_the_kv_shipped_check_fails_a_byte_model_off_by_two():
    t = pd.DataFrame({"prompt_tokens": [10, 30]})
    t["kv_bytes_shipped"] = t.prompt_tokens * 4096
    assert check.kv_shipped_agrees(t, 4096)[0]
    assert not check.kv_shipped_agrees(t, 2048)[0]
    assert not check.kv_shipped_agrees(t, 8192)[0]


def test_the_tp_check_fails_other_tokens_or_uneven_shards():
    ranks = [dict(outputs={0: [1, 2]}, shard_weight_bytes=100, kv_heads=1)] * 2
    assert check.tp_equals_one_process(ranks, {0: [1, 2]})[0]
    assert not check.tp_equals_one_process(ranks, {0: [1, 3]})[0]
    uneven = [ranks[0], dict(ranks[0], shard_weight_bytes=200)]
    assert not check.tp_equals_one_process(uneven, {0: [1, 2]})[0]


def test_the_answer_is_the_model_times_the_prompt():
    assert cl.serving_cluster.answer.kv_bytes_shipped(80, 8, 128, 1000, 2) == (
        1000 * m.kv_bytes_per_token(80, 8, 128)
    )


def test_the_disaggregation_sweep_and_its_chart_share_the_control():
    sweep = m.disagg_sweep()
    assert set(sweep.link) == {"NVLink 4", "NDR400 InfiniBand", "100GbE TCP"}
    nv = sweep[sweep.link == "NVLink 4"].transfer_s_per_token.iloc[0]
    eth = sweep[sweep.link == "100GbE TCP"].transfer_s_per_token.iloc[0]
    assert eth > 10 * nv
    spec = cl.serving_cluster.chart.disagg_chart(sweep).to_dict()
    names = [p["name"] for p in spec["params"]]
    assert cl.serving_cluster.chart.PROMPT_LOG2.name in names


def test_the_pipeline_diagram_labels_the_bytes_shipped():
    kv = m.kv_bytes_per_token(80, 8, 128)
    chart = cl.serving_cluster.diagram.disagg_diagram(
        kv, 4096, m.kv_transfer_s(4096, kv, "NDR400 InfiniBand"), "NDR400 InfiniBand"
    )
    text = str(chart.to_dict())
    assert "KV cache, 1.34 GB" in text and "NDR400 InfiniBand" in text


@pytest.mark.parametrize(
    "prompts, match",
    [([], "prompts=0"), ([[1, 2], []], r"prompts\[1\]"), ([[300]], "0, 255")],
)
def test_bad_prompts_are_refused_before_any_rank_starts(prompts, match):
    with pytest.raises(ValueError, match=match):
        cl.serving_cluster.measure.disagg_run(prompts)
    with pytest.raises(ValueError, match=match):
        cl.serving_cluster.measure.tp_decode(prompts)
