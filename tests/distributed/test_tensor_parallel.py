"""Tensor parallelism: the split MLP equals one process; traffic; Lab 10's check."""

import pytest
import torch
import torch.distributed as dist

import clusterlab as cl
from clusterlab.tensor_parallel.ranks import make_mlp, tp_mlp_worker

pytestmark = [pytest.mark.dist]

SHAPE = dict(batch=2, seq=8, hidden=16, ffn=64, seed=3)


def _reference():
    full = make_mlp(SHAPE["hidden"], SHAPE["ffn"], SHAPE["seed"])
    gen = torch.Generator().manual_seed(SHAPE["seed"] + 1)
    x = torch.randn(SHAPE["batch"], SHAPE["seq"], SHAPE["hidden"], generator=gen)
    x.requires_grad_()
    y = full(x)
    (y.pow(2).sum() / 2).backward()
    return full, x, y.detach()


@pytest.mark.parametrize("world_size", [2, 4])
def test_forward_and_backward_equal_one_process(world_size):
    res = cl.launch(tp_mlp_worker, world_size, timeout=30, **SHAPE)
    full, x, y = _reference()
    for r in res:
        torch.testing.assert_close(r["out"], y)
        torch.testing.assert_close(r["grad_x"], x.grad)
        torch.testing.assert_close(r["grad_fc2_b"], full[2].bias.grad)
    cat = lambda key, dim: torch.cat([r[key] for r in res], dim)  # noqa: E731
    torch.testing.assert_close(cat("grad_fc1_w", 0), full[0].weight.grad)
    torch.testing.assert_close(cat("grad_fc1_b", 0), full[0].bias.grad)
    torch.testing.assert_close(cat("grad_fc2_w", 1), full[2].weight.grad)
    # The shards really are shards: each rank holds 1/n of the first layer.
    assert res[0]["grad_fc1_w"].shape[0] == SHAPE["ffn"] // world_size


def test_one_all_reduce_of_b_s_h_each_way():
    res = cl.launch(tp_mlp_worker, 2, timeout=30, **SHAPE)
    activation_bytes = SHAPE["batch"] * SHAPE["seq"] * SHAPE["hidden"] * 4
    for r in res:
        assert [(c["phase"], c["bytes"]) for c in r["comm"]] == [
            ("forward", activation_bytes),
            ("backward", activation_bytes),
        ]


def test_a_width_the_ranks_cannot_split_is_refused():
    with pytest.raises(ValueError, match="out_features=6"):
        cl.tensor_parallel.ranks.TensorParallelMLP(make_mlp(4, 6), rank=0, world_size=4)
    with pytest.raises(ValueError, match="rank=4"):
        cl.tensor_parallel.ranks.TensorParallelMLP(make_mlp(4, 8), rank=4, world_size=4)


def test_reference_solution_passes(capsys):
    assert (
        cl.tensor_parallel.check.row_parallel_forward(
            cl.tensor_parallel.answer.row_parallel_forward
        )
        is True
    )
    assert "\u2714 row_parallel_forward" in capsys.readouterr().out


def test_a_stub_is_not_attempted(capsys):
    def stub(x_local, weight_local, bias):
        raise NotImplementedError

    assert cl.tensor_parallel.check.row_parallel_forward(stub) is False
    assert "not attempted" in capsys.readouterr().out


def test_forgetting_the_all_reduce_gets_a_hint():
    def local_only(x_local, weight_local, bias):
        return x_local @ weight_local.T + bias

    with pytest.raises(AssertionError, match="partial sum"):
        cl.tensor_parallel.check.row_parallel_forward(local_only, world_sizes=(2,))


def test_adding_the_bias_before_the_sum_gets_a_hint():
    def bias_first(x_local, weight_local, bias):
        y = x_local @ weight_local.T + bias
        dist.all_reduce(y)
        return y

    with pytest.raises(AssertionError, match="counted 2 times"):
        cl.tensor_parallel.check.row_parallel_forward(bias_first, world_sizes=(2,))


def test_the_check_needs_a_function():
    with pytest.raises(ValueError, match="fn="):
        cl.tensor_parallel.check.row_parallel_forward(None)


# Collectives counted below torch.distributed, against the tensor-parallel model.

from clusterlab.models.tensor_parallel import tp_bytes_agree, tp_mlp_allreduces  # noqa: E402
from clusterlab.tensor_parallel.measure import count_collectives, tp_count_worker  # noqa: E402

LAB = dict(batch=4, seq=16, hidden=32, ffn=128)


@pytest.fixture(scope="module")
def counted():
    return {n: cl.launch(tp_count_worker, n, **LAB) for n in (2, 4)}


def test_counted_collectives_are_the_models_on_2_and_4_ranks(counted):
    model = tp_mlp_allreduces(LAB["batch"], LAB["seq"], LAB["hidden"])
    for n, ranks in counted.items():
        for r in ranks:
            ok, message = tp_bytes_agree(r["counted"], model)
            assert ok, f"{n} ranks: {message}"


def test_tp_bytes_check_fails_when_the_model_has_one_allreduce_fewer(counted):
    model = tp_mlp_allreduces(LAB["batch"], LAB["seq"], LAB["hidden"])[:-1]
    ok, message = tp_bytes_agree(counted[2][0]["counted"], model)
    assert not ok and "counted 2 collectives, the model 1" in message


def test_tp_bytes_check_fails_when_the_model_divides_the_bytes_by_the_ranks(
    counted,
):
    model = tp_mlp_allreduces(LAB["batch"], LAB["seq"], LAB["hidden"] // 4)
    ok, message = tp_bytes_agree(counted[4][0]["counted"], model)
    assert not ok and "collective 1" in message


def test_tp_bytes_check_fails_when_a_count_is_perturbed(counted):
    model = tp_mlp_allreduces(LAB["batch"], LAB["seq"], LAB["hidden"])
    records = [dict(r) for r in counted[2][0]["counted"]]
    records[1]["bytes"] += 4
    assert not tp_bytes_agree(records, model)[0]


def _direct_allreduce(rank, world_size):
    t = torch.ones(10)
    with count_collectives() as c:
        dist.all_reduce(t)
        dist.broadcast(t, src=0)
    return c.records


def test_the_counter_sees_collectives_that_no_log_records():
    records = cl.launch(_direct_allreduce, 2)[0]
    assert [(r["op"], r["bytes"]) for r in records] == [
        ("all_reduce", 40),
        ("broadcast", 40),
    ]
