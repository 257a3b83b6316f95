"""The serving models (KV cache, decode roofline) and the serving lab's checks."""

import math

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import clusterlab as cl
from clusterlab.models import serving as S
from clusterlab.serving import check, widget


def test_kv_bytes_of_llama3_70b_and_of_deepseek_latent():
    assert S.kv_bytes_per_token(80, 8, 128, bytes_per_value=2) == 327_680
    assert S.kv_bytes_per_token(61, kv_latent_dim=576, bytes_per_value=2) == 70_272


@given(st.integers(1, 200), st.integers(1, 64), st.integers(1, 256), st.integers(1, 8))
def test_kv_bytes_scale_with_every_factor(layers, heads, dim, group):
    one = S.kv_bytes_per_token(layers, heads, dim)
    assert S.kv_bytes_per_token(layers, heads * group, dim) == group * one
    assert S.kv_bytes_per_token(2 * layers, heads, dim) == 2 * one


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        (dict(n_layers=0, n_kv_heads=8, head_dim=128), "n_layers=0"),
        (dict(n_layers=8, n_kv_heads=None, head_dim=128), "n_kv_heads"),
        (dict(n_layers=8, n_kv_heads=8, head_dim=128, bytes_per_value=0), "bytes"),
    ],
)
def test_bad_kv_inputs_are_named(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        S.kv_bytes_per_token(**kwargs)


def test_the_table_holds_fewer_tokens_for_bigger_caches_and_none_without_room():
    t = S.kv_cache_table("H200 SXM", 8).set_index("model")
    assert t.at["Llama 3 8B", "tokens_held"] > t.at["Llama 3 70B", "tokens_held"]
    assert t.at["DeepSeek-V3", "tokens_held"] == 0  # 1.34 TB of bf16 weights
    gqa = t["mha_bytes_per_token"] / t["kv_bytes_per_token"]
    assert gqa["Llama 3 70B"] == 8 and math.isnan(gqa["DeepSeek-V3"])


def test_decode_is_memory_bound_below_the_ridge_and_compute_bound_above():
    roof = dict(weight_bytes=1e9, flops_per_token=1e9, bandwidth_Bps=1e11)
    ridge = S.ridge_batch(1e13, 1e11, 2)  # 1e9 bytes = 5e8 weights of 2 bytes
    assert ridge == pytest.approx(100)
    small = S.decode_tokens_per_s(10, peak_flops=1e13, **roof)
    big = S.decode_tokens_per_s(1000, peak_flops=1e13, **roof)
    assert small == pytest.approx(10 / 1e-2)  # bytes / bandwidth
    assert big == pytest.approx(1e13 / 1e9)  # the compute roof


def _table(measured, model):
    return pd.DataFrame(
        {"batch": [1, 4, 16, 64], "tokens_per_s": measured,
         "roofline_tokens_per_s": model}
    )  # fmt: skip


# A step measured on the book's 2-core machine, and its roofline (the lab's run).
MEASURED = [372.0, 934.0, 3782.0, 6747.0]
ROOFLINE = [485.0, 1938.0, 7169.0, 7169.0]


def test_the_roofline_check_passes_the_measured_step():
    ok, text = check.decode_roofline_agrees(_table(MEASURED, ROOFLINE))
    assert ok, text


def test_the_check_fails_a_memory_only_model_of_decoding():
    memory_only = [485.0 * b for b in (1, 4, 16, 64)]
    ok, text = check.decode_roofline_agrees(_table(MEASURED, memory_only))
    assert not ok and "not within" in text


def test_the_check_fails_a_compute_only_model_of_decoding():
    compute_only = [7169.0] * 4
    ok, text = check.decode_roofline_agrees(_table(MEASURED, compute_only))
    assert not ok and "not within" in text


def test_the_check_fails_a_roof_below_the_measurement():
    low = [r / 3 for r in ROOFLINE]
    ok, text = check.decode_roofline_agrees(_table(MEASURED, low))
    assert not ok and "roof is too low" in text


def test_the_explorer_twin_binds_its_controls_and_stays_small():
    spec = widget.serving_twin().to_dict()
    names = {p["name"] for p in spec["params"]}
    assert {"served", "ctx_log2"} <= names
    assert len(str(spec)) < 50_000
    live = cl.serving.chart.explorer_chart(
        widget.explorer_inputs(), "Llama 3 8B", 4096, live=True
    ).to_dict()
    assert all("bind" not in p for p in live["params"])


def test_the_block_tables_show_the_shared_prefix():
    t = cl.serving.measure.block_tables()
    a = t[t.request == "A"].set_index("position")["block"]
    b = t[t.request == "B"].set_index("position")["block"]
    assert list(a[:2]) == list(b[:2]) and a[2] != b[2]  # 8 tokens = 2 blocks
    assert not t[t.request == "C"]["shared"].any()


def test_box_labels_do_not_take_the_boxes_colours():
    spec = cl.serving.diagram.block_table_diagram(
        cl.serving.measure.block_tables()
    ).to_dict()
    assert spec["resolve"]["scale"]["color"] == "independent"
