"""A ring all-reduce under deliberately skewed clocks, on real process groups."""

import pytest
import torch

from clusterlab.clocks.ranks import SkewedClock, run_skewed_allreduce, skew_paradoxes

pytestmark = [pytest.mark.dist]

SKEW = dict(
    offsets_s=(0.0, 17e-3, -17e-3, 5e-3),
    drifts_ppm=(0.0, 200.0, -150.0, 50.0),
    max_delay_s=10e-3,
)


def test_skewed_clocks_and_random_delays_give_bit_identical_sums():
    skewed, skewed_log = run_skewed_allreduce(4, **SKEW, numel=1003, steps=3, seed=1)
    plain, plain_log = run_skewed_allreduce(4, numel=1003, steps=3, seed=1)
    for rank, (a, b) in enumerate(zip(skewed, plain, strict=True)):
        assert a.dtype == torch.float32 and a.shape == (3, 1003)
        assert torch.equal(a, b), f"rank {rank}: sums differ under skewed clocks"
    # Every rank holds the same sums, and they are the sums (up to rounding).
    assert all(torch.equal(skewed[0], s) for s in skewed)
    expected = torch.zeros(3, 1003, dtype=torch.float64)
    for rank in range(4):
        gen = torch.Generator().manual_seed(1_000 * 1 + rank)
        expected += torch.stack([torch.randn(1003, generator=gen) for _ in range(3)])
    torch.testing.assert_close(skewed[0].double(), expected, rtol=1e-5, atol=1e-5)
    # One machine's clock, shared by all ranks, never puts the log out of order.
    assert len(skew_paradoxes(plain_log)) == 0
    assert len(skew_paradoxes(skewed_log.assign(wall_s=skewed_log["true_s"]))) == 0


def test_clocks_further_apart_than_a_step_put_the_log_in_an_impossible_order():
    # Offsets far above an all-reduce's duration, even on a loaded machine.
    offsets = (0.0, 0.5, -0.5, 0.25)
    skewed, log = run_skewed_allreduce(4, offsets_s=offsets, steps=2, seed=2)
    plain, _ = run_skewed_allreduce(4, steps=2, seed=2)
    assert all(torch.equal(a, b) for a, b in zip(skewed, plain, strict=True))
    paradoxes = skew_paradoxes(log)
    assert len(paradoxes) > 0
    assert (paradoxes["early_s"] > 0).all()
    assert set(log.columns) >= {"rank", "step", "event", "wall_s", "true_s"}
    assert len(log) == 4 * 2 * 2


def test_a_skewed_clock_is_off_by_its_offset_and_drifts():
    import time

    # now() = t + offset + (t - start) * 10%; bracketing t and start with real
    # readings makes the bounds exact however long the sleep really took
    t0 = time.time()
    clock = SkewedClock(offset_s=0.5, drift_ppm=1e5)  # 10% fast, for a quick test
    t1 = time.time()
    time.sleep(0.05)
    a = time.time()
    reading = clock.now() - 0.5
    b = time.time()
    assert a + (a - t1) * 0.1 <= reading <= b + (b - t0) * 0.1
    assert reading - a >= 0.1 * 0.05 * 0.99  # it gained 10% of the sleep, at least


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="one value per rank"):
        run_skewed_allreduce(2, offsets_s=(0.0,))
    with pytest.raises(ValueError, match="max_delay_s=-1"):
        run_skewed_allreduce(2, max_delay_s=-1)
    with pytest.raises(ValueError, match="drift_ppm"):
        SkewedClock(drift_ppm=float("nan"))


def test_a_skewed_clock_reads_its_offset_and_drift_at_a_given_true_time():
    clock = SkewedClock(offset_s=0.017, drift_ppm=100.0)
    t = clock.start_s + 10.0  # 10 s later: 100 ppm has added 1 ms
    assert clock.at(t) - t == pytest.approx(0.018, abs=1e-6)  # epoch floats: ~0.2 µs
    assert clock.at(clock.start_s) - clock.start_s == pytest.approx(0.017, abs=1e-6)
