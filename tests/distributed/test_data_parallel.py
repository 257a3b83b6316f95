"""Data parallelism by hand equals DDP; Lab 08's exercise check against answers."""

import pytest
import torch
import torch.distributed as dist

import clusterlab as cl
from clusterlab.data_parallel.ranks import dp_batch, dp_mlp, dp_train_worker

pytestmark = [pytest.mark.dist]


@pytest.mark.parametrize("world_size", [2, 4])
def test_hand_data_parallel_equals_ddp_after_five_steps(world_size):
    out = cl.launch(dp_train_worker, world_size, steps=5, width=32, depth=2)
    start = cl.data_parallel.ranks.flat_params(dp_mlp(32, 2, seed=0))
    for rank, res in enumerate(out):
        hand, ddp = res["hand"]["params"], res["ddp"]["params"]
        assert torch.allclose(hand, ddp, atol=1e-6, rtol=0), (
            f"rank {rank}: hand DP and DDP differ by {(hand - ddp).abs().max():.2e}"
        )
        # and every rank ends with rank 0's weights, which did move
        assert torch.allclose(hand, out[0]["hand"]["params"], atol=1e-7, rtol=0)
    assert (out[0]["hand"]["params"] - start).abs().max() > 1e-3


def test_data_parallel_equals_one_process_on_the_whole_batch():
    kw = dict(steps=5, width=32, depth=1, modes=("hand",))
    four = cl.launch(dp_train_worker, 4, batch_per_rank=4, **kw)
    one = cl.launch(dp_train_worker, 1, batch_per_rank=16, **kw)
    gap = (four[0]["hand"]["params"] - one[0]["hand"]["params"]).abs().max()
    assert gap < 1e-6, f"4 ranks × 4 rows should train like 1 rank × 16 rows: {gap}"


def test_the_slices_of_all_ranks_make_up_the_global_batch():
    whole_x, whole_y = dp_batch(3, 0, 1, 12, 5, seed=1)
    parts = [dp_batch(3, r, 3, 4, 5, seed=1) for r in range(3)]
    assert torch.equal(torch.cat([p[0] for p in parts]), whole_x)
    assert torch.equal(torch.cat([p[1] for p in parts]), whole_y)


def test_timings_come_back_per_step():
    (res,) = cl.launch(dp_train_worker, 1, steps=3, width=16, depth=1)
    for mode in ("hand", "ddp"):
        assert len(res[mode]["step_s"]) == 3
        assert all(s > 0 for s in res[mode]["step_s"])
    assert res["ddp"]["comm_s"] == [pytest.approx(0.0, abs=1e-3)] * 3


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"steps": 0}, "steps=0"),
        ({"modes": ("fsdp",)}, "'fsdp'"),
        ({"lr": 0.0}, "lr=0.0"),
        ({"width": 0}, "width=0"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, name):
    with pytest.raises(ValueError, match=name):
        dp_train_worker(0, 1, **kwargs)


# ------------------------------------------------------------ the exercise check
def test_the_reference_solution_passes(capsys):
    assert (
        cl.data_parallel.check.average_gradients(
            cl.data_parallel.answer.average_gradients
        )
        is True
    )
    assert "\u2714 average_gradients" in capsys.readouterr().out


def test_a_stub_is_not_attempted(capsys):
    def stub(model, world_size):
        raise NotImplementedError

    assert cl.data_parallel.check.average_gradients(stub) is False
    assert "not attempted" in capsys.readouterr().out


def test_summing_without_dividing_fails_with_a_hint():
    def summed(model, world_size):
        for p in model.parameters():
            dist.all_reduce(p.grad)

    with pytest.raises(AssertionError, match="divide by world_size"):
        cl.data_parallel.check.average_gradients(summed, world_sizes=(2,))


def test_doing_nothing_fails_with_a_hint():
    with pytest.raises(AssertionError, match="was it all-reduced"):
        cl.data_parallel.check.average_gradients(
            lambda model, world_size: None, world_sizes=(2,)
        )


def test_one_all_reduce_per_tensor_is_right_but_not_bucketed():
    def per_tensor(model, world_size):
        cl.data_parallel.ranks.allreduce_gradients(model)

    with pytest.raises(AssertionError, match="one flat bucket"):
        cl.data_parallel.check.average_gradients(per_tensor, world_sizes=(2,))


def test_a_rank_that_skips_the_collective_becomes_a_hint(monkeypatch):
    monkeypatch.setattr(cl.core.checks, "CHECK_TIMEOUT_S", 2.0)

    def lopsided(model, world_size):
        if dist.get_rank() == 0:
            cl.data_parallel.answer.average_gradients(model, world_size)

    with pytest.raises(AssertionError, match="same collectives"):
        cl.data_parallel.check.average_gradients(lopsided, world_sizes=(2,))


def test_the_hand_version_times_its_wait_apart_from_its_all_reduces():
    out = cl.launch(dp_train_worker, 2, steps=3, width=16, depth=1)
    hand = out[0]["hand"]
    assert len(hand["wait_s"]) == 3 and min(hand["wait_s"]) >= 0
    for w, c, k, s in zip(
        hand["wait_s"], hand["comm_s"], hand["compute_s"], hand["step_s"], strict=True
    ):
        assert w + c + k == pytest.approx(s, rel=1e-6, abs=1e-6)


def test_comm_prediction_fails_when_alpha_is_zero_and_beta_4x_on_a_real_run():
    from clusterlab.data_parallel.check import comm_prediction

    model = dp_mlp(256, 2)
    tensor_bytes = [p.numel() * p.element_size() for p in model.parameters()]
    sizes = [4, 2**8, 2**12, 2**16, 2**20]
    bench = cl.core.bench.bench_collective("all_reduce", sizes, 2, iters=20)
    two_alpha_s, bw_Bps = cl.core.alpha_beta.fit_alpha_beta(
        bench["size_bytes"], bench["time_s"]
    )
    out = cl.launch(dp_train_worker, 2, steps=6, width=256, modes=("hand",))

    def wrong(nbytes, n, alpha_s, bw):
        return cl.models.collectives.allreduce_time(nbytes, n, 0.0, 4 * bw)

    with pytest.raises(AssertionError, match="missed on all 2 tries"):
        comm_prediction(
            out, tensor_bytes, two_alpha_s / 2, bw_Bps, tries=2, predict=wrong
        )
