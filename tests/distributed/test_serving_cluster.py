"""Serving on a cluster: tensor-parallel decoding and disaggregated prefill on
real gloo process groups, each against one process (float64, so no argmax can
differ by rounding). The folder's fixture holds every test to leaving nothing
running."""

import pytest
import torch

import clusterlab as cl
from clusterlab.core.launcher import launch
from clusterlab.serving_cluster import check
from clusterlab.serving_cluster.measure import (
    CLUSTER_MODEL,
    comm_table,
    disagg_run,
    disagg_table,
    prompts_of,
    reference_outputs,
    tp_decode,
)
from clusterlab.serving_cluster.ranks import TensorParallelEngine, tp_decode_worker

pytestmark = [pytest.mark.dist]

PROMPTS = prompts_of(5, 1, 40, seed=3)


@pytest.fixture(scope="module")
def reference():
    return reference_outputs(PROMPTS, new_tokens=10)


def test_tensor_parallel_decoding_equals_one_process(reference):
    ranks = tp_decode(PROMPTS, new_tokens=10, world_size=2, timeout=60)
    ok, text = check.tp_equals_one_process(ranks, reference)
    assert ok, text
    model = cl.serving.tiny.tiny_model()
    per_layer = sum(
        p.numel() * p.element_size()
        for layer in model.model.layers
        for name, p in layer.named_parameters()
        if "proj" in name
    )
    assert ranks[0]["shard_weight_bytes"] * 2 == per_layer  # half of every layer
    assert ranks[0]["kv_heads"] == model.config.num_key_value_heads // 2


def test_two_allreduces_per_layer_of_hidden_x_tokens_bytes():
    ranks = tp_decode(PROMPTS[:2], new_tokens=4, world_size=2, timeout=60)
    hidden, layers = 64, 2
    for r in ranks:
        table = comm_table(r)
        assert (table.allreduces == 2 * layers).all()
        assert (table.bytes == table.tokens * hidden * 8).all()
        decode = table[table.tokens == 2]  # both requests decoding
        assert decode.steps.sum() == 3  # tokens 2..4


def test_a_wrong_split_fails_the_check(reference):
    wrong = reference_outputs(PROMPTS, new_tokens=10, seed=1)
    ranks = tp_decode(PROMPTS, new_tokens=10, world_size=2, timeout=60)
    ok, text = check.tp_equals_one_process(ranks, wrong)
    assert not ok and "one process" in text


def test_a_split_the_heads_do_not_allow_is_refused():
    model = cl.serving.tiny.tiny_model()  # 4 heads, 2 KV heads
    with pytest.raises(ValueError, match="num_key_value_heads=2"):
        TensorParallelEngine(model, 0, 4)


def test_a_failed_rank_is_named_and_nothing_hangs():
    with pytest.raises(cl.core.supervisor.LaunchError, match="rank"):
        launch(tp_decode_worker, 2, timeout=20, prompts=[[1, 2]], new_tokens=0)


def test_disaggregated_prefill_equals_one_engine_and_ships_the_model_bytes():
    prompts = prompts_of(4, 20, 60, seed=5)
    run = disagg_run(prompts, new_tokens=6, timeout=60)
    ref = reference_outputs(prompts, new_tokens=6, model_kw=CLUSTER_MODEL)
    ok, text = check.disagg_equals_engine(run, ref)
    assert ok, text
    table = disagg_table(run, prompts)
    c = CLUSTER_MODEL
    per_token = cl.models.serving.kv_bytes_per_token(
        c["num_hidden_layers"],
        c["num_key_value_heads"],
        c["hidden_size"] // c["num_attention_heads"],
        bytes_per_value=8,
    )
    ok, text = check.kv_shipped_agrees(table, per_token)
    assert ok, text
    # A byte model off by two (keys only, or half the layers) fails.
    ok, text = check.kv_shipped_agrees(table, per_token / 2)
    assert not ok and "the model says" in text
    assert (table.ttft_disagg_s > 0).all() and (table.itl_disagg_s > 0).all()
    assert not check.disagg_equals_engine(run, {0: [0] * 6})[0]


def test_kv_shipped_survives_a_request_that_ends_at_its_first_token():
    prompts = [[1, 2, 3], [4, 5, 6, 7]]
    run = disagg_run(prompts, new_tokens=1, timeout=60)
    assert run["decode"]["outputs"] == run["colocated"]["outputs"]
    assert all(len(v) == 1 for v in run["decode"]["outputs"].values())


def test_the_exercise_check_passes_the_answer_and_fails_a_wrong_one(capsys):
    assert check.kv_bytes_shipped(cl.serving_cluster.answer.kv_bytes_shipped)
    with pytest.raises(AssertionError, match="keys and values"):
        check.kv_bytes_shipped(lambda L, h, d, n, b: L * h * d * n * b)
    with pytest.raises(AssertionError):  # the first token's KV counted too
        check.kv_bytes_shipped(lambda L, h, d, n, b: 2 * L * h * d * (n + 1) * b)
    assert torch.__version__  # the check ran the real engine, in this process
