"""Physical clocks that drift, and the protocols that pull them back (SimPy).

Every node keeps time with its own oscillator, which runs fast or slow by a few
parts per million (ppm): a clock off by ``r`` ppm gains ``r`` µs every second.
A sync protocol measures each node's offset from a reference time server and
corrects it. What it cannot correct is the error of the measurement itself:

* ``"none"``: free-running clocks; two nodes drift apart at the difference of
  their rates, so they reach a skew ``S`` after ``S / |r_a - r_b|`` seconds;
* ``"ntp"``: an NTP-like two-way exchange timestamped in software. The offset
  estimate ``((T2 - T1) + (T3 - T4)) / 2`` assumes equal delays both ways, so
  half the difference between the two one-way delays (fixed path asymmetry plus
  random queueing and software jitter) becomes clock error;
* ``"ptp"``: a PTP-like exchange whose timestamps are taken by the network
  card as the packet passes, so queues and software drop out and only the
  hardware timestamp error is left.

Both protocols step the clock at each sync and, from the second sync on, also
correct its rate (``discipline``), as NTP and PTP daemons do. Oscillator rates
also wander slowly (temperature), which is why the sync interval still matters.

``simulate(params, seed)`` returns every node's error, local time minus true
time, sampled over the run, as a tidy DataFrame; ``skew`` reduces it to the
largest minus the smallest error. Sweeps over drifts and sync intervals for
the charts are in ``cl.clocks.sim``.

Clock skew over a grid of drifts and sync intervals, for charts with sliders.

``skew_sweep`` runs ``cl.clocks.sim.simulate`` for every combination and keeps
the largest skew in each window of time, so a page can carry every run and let
its sliders pick one with no kernel behind it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import simpy

from clusterlab.core.validate import check_choice, check_float, check_int

PROTOCOLS = ("none", "ntp", "ptp")


_WANDER_STEP_S = 10.0  # how often an oscillator's rate takes a random-walk step


# Rate corrections average over about this long, so that one noisy measurement
# on a short sync interval does not become a large rate error.
_RATE_TIME_CONSTANT_S = 64.0


@dataclass(frozen=True)
class ClockParams:
    """Parameters of a clock simulation (SI units; drift in ppm).

    Attributes:
        n_nodes: number of nodes, in [2, 64].
        protocol: ``"none"``, ``"ntp"`` or ``"ptp"``.
        drift_ppm: each node's rate error in ppm; ``None`` draws them uniformly
            in ``[-max_drift_ppm, +max_drift_ppm]``.
        max_drift_ppm: spread of the drawn rates, in [0, 1000] ppm.
        max_offset_s: spread of the initial offsets (uniform, ±), in [0, 10] s.
        duration_s: simulated time, in (0, 1e7] s.
        sample_interval_s: time between samples of every node's error.
        sync_interval_s: time between one node's syncs, in [0.01, 1e5] s.
        one_way_delay_s: network delay each way before jitter.
        asymmetry_s: NTP-like only: the largest path asymmetry (forward minus
            return delay); each node's own, fixed one is drawn in ±asymmetry_s.
        jitter_s: NTP-like only: mean extra delay each way (exponential),
            from queues and software timestamping.
        hw_timestamp_error_s: PTP-like only: standard deviation of one hardware
            timestamp's error.
        wander_ppm_per_hour: standard deviation of each rate's random walk over
            one hour (temperature changes), in ppm.
        discipline: whether a sync also corrects the clock's rate.
    """

    n_nodes: int = 4
    protocol: str = "none"
    drift_ppm: tuple[float, ...] | None = None
    max_drift_ppm: float = 50.0
    max_offset_s: float = 0.0
    duration_s: float = 3600.0
    sample_interval_s: float = 10.0
    sync_interval_s: float = 16.0
    one_way_delay_s: float = 50e-6
    asymmetry_s: float = 100e-6
    jitter_s: float = 100e-6
    hw_timestamp_error_s: float = 20e-9
    wander_ppm_per_hour: float = 0.5
    discipline: bool = True

    def __post_init__(self):
        check_int("n_nodes", self.n_nodes, 2, 64)
        check_choice("protocol", self.protocol, PROTOCOLS)
        if self.drift_ppm is not None:
            if len(self.drift_ppm) != self.n_nodes:
                raise ValueError(
                    f"drift_ppm={self.drift_ppm!r} must give one rate per node "
                    f"(n_nodes={self.n_nodes})"
                )
            for d in self.drift_ppm:
                check_float("drift_ppm", d, -1000.0, 1000.0)
        check_float("max_drift_ppm", self.max_drift_ppm, 0.0, 1000.0)
        check_float("max_offset_s", self.max_offset_s, 0.0, 10.0)
        check_float("duration_s", self.duration_s, 0.0, 1e7, low_inclusive=False)
        check_float("sample_interval_s", self.sample_interval_s, 1e-3, self.duration_s)
        check_float("sync_interval_s", self.sync_interval_s, 0.01, 1e5)
        check_float("one_way_delay_s", self.one_way_delay_s, 0.0, 1.0)
        check_float("asymmetry_s", self.asymmetry_s, 0.0, 2 * self.one_way_delay_s)
        check_choice("discipline", self.discipline, (True, False))
        check_float("jitter_s", self.jitter_s, 0.0, 1.0)
        check_float("hw_timestamp_error_s", self.hw_timestamp_error_s, 0.0, 1e-3)
        check_float("wander_ppm_per_hour", self.wander_ppm_per_hour, 0.0, 100.0)


class _Clock:
    """A node's clock: local(t) = base_local + (t - base_t) * (1 + rate)."""

    def __init__(self, offset_s: float, rate: float):
        self.base_t, self.base_local = 0.0, offset_s
        self.rate = rate  # oscillator's own error, as a fraction (ppm * 1e-6)
        self.correction = 0.0  # the rate the protocol has subtracted

    def read(self, t: float) -> float:
        return self.base_local + (t - self.base_t) * (1 + self.rate - self.correction)

    def rebase(self, t: float) -> None:
        self.base_local, self.base_t = self.read(t), t


def _draw_rates(p: ClockParams, rng: np.random.Generator) -> np.ndarray:
    if p.drift_ppm is not None:
        return np.asarray(p.drift_ppm, dtype=float)
    return rng.uniform(-p.max_drift_ppm, p.max_drift_ppm, p.n_nodes)


def _measure_offset(
    p: ClockParams, clock: _Clock, asym_s: float, t: float, noise
) -> float:
    """One two-way exchange at true time ``t``: the estimated offset (s).

    The reference server's clock is true time. The client stamps T1 and T4 on
    its own clock; the server stamps T2 and T3 (here with no processing delay).
    ``noise`` holds this exchange's random draws: two queueing delays (NTP-like)
    or four timestamp errors (PTP-like).
    """
    if p.protocol == "ntp":
        d_fwd = p.one_way_delay_s + asym_s / 2 + noise[0]
        d_back = p.one_way_delay_s - asym_s / 2 + noise[1]
        e1 = e2 = e3 = e4 = 0.0
    else:  # ptp: stamped on the wire, so only the stamps' own error remains
        d_fwd = d_back = p.one_way_delay_s
        e1, e2, e3, e4 = noise
    t1 = clock.read(t) + e1
    t2 = t + d_fwd + e2
    t3 = t + d_fwd + e3
    t4 = clock.read(t + d_fwd + d_back) + e4
    # Server minus client, if both directions took equally long.
    return ((t2 - t1) + (t3 - t4)) / 2


def simulate(params: ClockParams, seed: int = 0) -> pd.DataFrame:
    """Run the clocks and the sync protocol; sample every node's error.

    Args:
        params: a ``ClockParams``.
        seed: seeds the rates (if drawn), offsets, delays and wander.

    Returns:
        A DataFrame with one row per node and sample: ``time_s`` (true time),
        ``node``, ``drift_ppm`` (the node's starting rate error), ``error_s``
        (local clock minus true time) and ``protocol``.
    """
    if not isinstance(params, ClockParams):
        raise ValueError(f"params={params!r} must be a ClockParams")
    p = params
    rng = np.random.default_rng(seed)
    rates = _draw_rates(p, rng)
    offsets = rng.uniform(-p.max_offset_s, p.max_offset_s, p.n_nodes)
    clocks = [_Clock(o, r * 1e-6) for o, r in zip(offsets, rates, strict=True)]
    asym = rng.uniform(-p.asymmetry_s, p.asymmetry_s, p.n_nodes)
    env = simpy.Environment()
    rows: list[tuple] = []

    def wander():
        step = p.wander_ppm_per_hour * 1e-6 * math.sqrt(_WANDER_STEP_S / 3600.0)
        while True:
            yield env.timeout(_WANDER_STEP_S)
            for c, dr in zip(clocks, rng.normal(0.0, step, p.n_nodes), strict=True):
                c.rebase(env.now)
                c.rate += dr

    def sync(i: int):
        c = clocks[i]
        # Nodes poll out of phase, as independent daemons do.
        yield env.timeout(rng.uniform(0, p.sync_interval_s))
        last_t = None
        # Draw every exchange's noise at once: one NumPy call, not thousands.
        n = int(p.duration_s / p.sync_interval_s) + 2
        if p.protocol == "ntp":
            noise = rng.exponential(p.jitter_s, (n, 2)).tolist()
        else:
            noise = rng.normal(0.0, p.hw_timestamp_error_s, (n, 4)).tolist()
        for k in range(n):
            start = env.now
            offset = _measure_offset(p, c, asym[i], start, noise[k])
            # The reply comes back within a round trip (< 1 ms), during which a
            # clock drifts by nanoseconds: the correction is applied at once.
            c.rebase(env.now)
            c.base_local += offset
            if p.discipline and last_t is not None:
                # The offset built up since the last step, over that time, is
                # the rate still uncorrected (plus measurement noise).
                gain = min(1.0, (start - last_t) / _RATE_TIME_CONSTANT_S)
                c.correction -= gain * offset / (start - last_t)
            last_t = start
            yield env.timeout(p.sync_interval_s)

    def sample():
        while True:
            for i, c in enumerate(clocks):
                rows.append((env.now, i, rates[i], c.read(env.now) - env.now))
            yield env.timeout(p.sample_interval_s)

    if p.wander_ppm_per_hour > 0:
        env.process(wander())
    if p.protocol != "none":
        for i in range(p.n_nodes):
            env.process(sync(i))
    env.process(sample())
    env.run(until=p.duration_s + p.sample_interval_s / 2)
    df = pd.DataFrame(rows, columns=["time_s", "node", "drift_ppm", "error_s"])
    df["protocol"] = p.protocol
    return df


def skew(df: pd.DataFrame) -> pd.DataFrame:
    """The skew at each sample: the largest minus the smallest node error.

    Args:
        df: ``simulate``'s output (several protocols may be stacked).

    Returns:
        A DataFrame with ``protocol``, ``time_s`` and ``skew_s`` (seconds).
    """
    needed = {"time_s", "node", "error_s", "protocol"}
    if not isinstance(df, pd.DataFrame) or not needed <= set(df.columns):
        raise ValueError(f"df must be simulate()'s DataFrame with columns {needed}")
    g = df.groupby(["protocol", "time_s"], sort=True)["error_s"]
    return (g.max() - g.min()).rename("skew_s").reset_index()


def time_to_skew(skew_s: float, drift_a_ppm: float, drift_b_ppm: float) -> float:
    """Seconds until two free-running clocks, set equal at 0, are ``skew_s`` apart.

    They drift apart at ``|a - b|`` ppm, i.e. ``|a - b| * 1e-6`` seconds per
    second, so the answer is ``skew_s / (|a - b| * 1e-6)`` (``inf`` if equal).
    """
    check_float("skew_s", skew_s, 0.0)
    a = check_float("drift_a_ppm", drift_a_ppm, -1e6, 1e6)
    b = check_float("drift_b_ppm", drift_b_ppm, -1e6, 1e6)
    rate = abs(a - b) * 1e-6
    return math.inf if rate == 0 else skew_s / rate


def skew_sweep(
    max_drifts_ppm,
    sync_intervals_s,
    protocols=PROTOCOLS,
    *,
    base: ClockParams | None = None,
    bins: int = 40,
    seed: int = 0,
) -> pd.DataFrame:
    """Skew over time for every combination, binned to keep the table small.

    Each run's samples are grouped into ``bins`` equal windows of time and the
    largest skew in each window is kept, so a sawtooth between syncs is not
    lost by sampling. With no protocol the sync interval changes nothing, so
    that run is done once per drift and repeated for each interval.

    Args:
        max_drifts_ppm: values for ``max_drift_ppm``.
        sync_intervals_s: values for ``sync_interval_s``.
        protocols: protocols to run.
        base: the other parameters (default ``ClockParams()``).
        bins: windows per run, in [2, 1000].
        seed: one seed for every run, so runs differ only by their parameters.

    Returns:
        A DataFrame with ``max_drift_ppm``, ``sync_interval_s``, ``protocol``,
        ``time_s`` (end of the window) and ``skew_s`` (largest in the window).
    """
    base = base or ClockParams()
    check_int("bins", bins, 2, 1000)
    frames = []
    for drift in max_drifts_ppm:
        for proto in protocols:
            intervals = [base.sync_interval_s] if proto == "none" else sync_intervals_s
            for interval in intervals:
                p = ClockParams(
                    **{
                        **base.__dict__,
                        "max_drift_ppm": float(drift),
                        "sync_interval_s": float(interval),
                        "protocol": proto,
                    }
                )
                s = skew(simulate(p, seed))
                edges = np.linspace(0, p.duration_s, bins + 1)
                window = np.clip(np.searchsorted(edges, s["time_s"]), 1, bins)
                s = s.groupby(window)["skew_s"].max()
                for iv in sync_intervals_s if proto == "none" else [interval]:
                    frames.append(
                        pd.DataFrame(
                            {
                                "max_drift_ppm": float(drift),
                                "sync_interval_s": float(iv),
                                "protocol": proto,
                                "time_s": edges[s.index.to_numpy()],
                                "skew_s": s.to_numpy(),
                            }
                        )
                    )
    return pd.concat(frames, ignore_index=True)


__all__ = ["ClockParams", "PROTOCOLS", "simulate", "skew", "skew_sweep", "time_to_skew"]
