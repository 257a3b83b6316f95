"""Physical clocks: drift arithmetic, and what NTP-like and PTP-like sync reach."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

import clusterlab as cl
from clusterlab.clocks.sim import ClockParams, simulate, skew, skew_sweep, time_to_skew


def _first_time_at(df, skew_s):
    s = skew(df)
    return s.loc[s["skew_s"] >= skew_s, "time_s"].iloc[0]


@pytest.mark.parametrize(
    "a_ppm, b_ppm, skew_s",
    [(30.0, -20.0, 17e-3), (5.0, 4.0, 1e-3), (-50.0, 50.0, 0.1), (0.2, 0.6, 17e-3)],
)
def test_free_running_clocks_reach_a_skew_at_skew_over_drift_difference(
    a_ppm, b_ppm, skew_s
):
    predicted = time_to_skew(skew_s, a_ppm, b_ppm)
    assert predicted == pytest.approx(skew_s / (abs(a_ppm - b_ppm) * 1e-6))
    p = ClockParams(
        n_nodes=2,
        drift_ppm=(a_ppm, b_ppm),
        wander_ppm_per_hour=0.0,
        duration_s=1.2 * predicted,
        sample_interval_s=predicted / 1000,  # 0.1% resolution
    )
    assert _first_time_at(simulate(p), skew_s) == pytest.approx(predicted, rel=0.01)


def test_equal_rates_never_drift_apart():
    assert time_to_skew(1e-3, 7.0, 7.0) == float("inf")


def test_each_node_gains_its_drift_in_microseconds_per_second():
    df = simulate(
        ClockParams(
            n_nodes=3,
            drift_ppm=(1.0, -10.0, 50.0),
            wander_ppm_per_hour=0.0,
            duration_s=100.0,
        )
    )
    end = df[df["time_s"] == df["time_s"].max()].sort_values("node")
    t = end["time_s"].iloc[0]
    np.testing.assert_allclose(end["error_s"], np.array([1.0, -10.0, 50.0]) * 1e-6 * t)


def _settled_error_s(**changes):
    p = ClockParams(protocol="ntp", duration_s=1800.0, **changes)
    df = simulate(p, seed=3)
    return df.loc[df["time_s"] >= 600, "error_s"].abs().mean()


def test_ntp_error_shrinks_with_smaller_path_asymmetry():
    # With no jitter the error is exactly half each node's asymmetry.
    errors = [
        _settled_error_s(asymmetry_s=a, jitter_s=0.0, one_way_delay_s=500e-6)
        for a in (800e-6, 200e-6, 50e-6, 0.0)
    ]
    assert errors[0] > errors[1] > errors[2] > errors[3]
    assert errors[3] < 1e-6
    # And with the default jitter on top, large asymmetry still shows.
    assert _settled_error_s(asymmetry_s=1e-3, one_way_delay_s=1e-3) > 2 * (
        _settled_error_s(asymmetry_s=10e-6, one_way_delay_s=1e-3)
    )


def test_ntp_error_is_half_the_asymmetry_when_there_is_no_jitter():
    p = ClockParams(
        n_nodes=2,
        protocol="ntp",
        jitter_s=0.0,
        asymmetry_s=100e-6,
        wander_ppm_per_hour=0.0,
        duration_s=600.0,
    )
    df = simulate(p, seed=5)
    rng = np.random.default_rng(5)
    rng.uniform(-50, 50, 2), rng.uniform(0, 0, 2)  # rates, offsets
    asym = rng.uniform(-100e-6, 100e-6, 2)
    end = df[df["time_s"] == df["time_s"].max()].sort_values("node")
    # A longer way out than back makes the client think the server is further
    # ahead than it is, so the clock is set half the asymmetry fast.
    np.testing.assert_allclose(end["error_s"], asym / 2, atol=1e-7)


def test_protocols_rank_as_published_none_ntp_ptp():
    worst = {}
    # Polling as the daemons do by default: NTP every 64 s, PTP every second.
    for proto, interval in (("none", 64.0), ("ntp", 64.0), ("ptp", 1.0)):
        p = ClockParams(protocol=proto, sync_interval_s=interval, duration_s=1800.0)
        df = simulate(p, seed=1)
        s = skew(df)
        worst[proto] = s.loc[s["time_s"] >= 600, "skew_s"].max()
    assert worst["none"] > 17e-3  # minutes, not hours, at tens of ppm
    assert 1e-6 < worst["ntp"] < 1e-3  # better than 1 ms on a LAN
    assert worst["ptp"] < 1e-6  # below a microsecond with hardware stamps


def test_without_rate_discipline_the_skew_grows_with_the_interval():
    base = ClockParams(protocol="ptp", discipline=False, duration_s=1800.0)
    worst = [
        skew(simulate(dataclasses.replace(base, sync_interval_s=iv)))["skew_s"].max()
        for iv in (4.0, 64.0)
    ]
    assert worst[1] > 8 * worst[0]


def test_simulate_is_tidy_and_reproducible():
    p = ClockParams(protocol="ntp", duration_s=120.0)
    a, b = simulate(p, seed=11), simulate(p, seed=11)
    pd.testing.assert_frame_equal(a, b)
    assert list(a.columns) == ["time_s", "node", "drift_ppm", "error_s", "protocol"]
    assert len(a) == 4 * 13
    assert not a.equals(simulate(p, seed=12))


def test_sweep_has_every_combination_and_bins():
    sw = skew_sweep(
        [1.0, 10.0], [4.0, 16.0], base=ClockParams(duration_s=300.0), bins=5
    )
    combos = sw.groupby(["max_drift_ppm", "sync_interval_s", "protocol"]).size()
    assert len(combos) == 2 * 2 * 3 and (combos == 5).all()
    assert (sw["skew_s"] >= 0).all()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_nodes=1), "n_nodes=1"),
        (dict(protocol="gps"), "protocol='gps'"),
        (dict(drift_ppm=(1.0,)), "one rate per node"),
        (dict(sync_interval_s=0.0), "sync_interval_s=0.0"),
        (dict(asymmetry_s=1.0), "asymmetry_s=1.0"),
        (dict(discipline="yes"), "discipline='yes'"),
    ],
)
def test_bad_parameters_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ClockParams(**kwargs)


def test_simulate_needs_params_and_time_to_skew_checks_its_input():
    with pytest.raises(ValueError, match="ClockParams"):
        simulate({"n_nodes": 2})
    with pytest.raises(ValueError, match="skew_s=-1"):
        time_to_skew(-1, 1, 2)


def test_reachable_from_the_package():
    assert cl.clocks.sim.simulate is simulate
    # the sweep lives in its own module; the old name still reaches it
    assert cl.clocks.sim.skew_sweep is skew_sweep is cl.clocks.sim.skew_sweep
    with pytest.raises(AttributeError, match="no_such_name"):
        cl.clocks.sim.no_such_name  # noqa: B018
