"""A heartbeat failure detector over a network that delays and loses messages.

A monitored process sends a heartbeat every ``interval_s``; each one is lost with
probability ``loss`` or arrives after ``base_delay_s`` plus an exponential jitter
of mean ``jitter_s``. The detector suspects the process once ``timeout_s`` has
passed with no heartbeat, and trusts it again when one arrives. Silence is all it
ever sees, so a short timeout accuses a live process (a false alarm) and a long
one is slow to notice a dead one: the trade-off every timeout makes, NCCL's and
gloo's included.

``simulate`` is the SimPy model (one run, one crash, every event);
``heartbeat_sweep`` is a vectorised NumPy engine for many timeouts at once, tested
against the SimPy model and against the closed forms in ``cl.models.failures``.
The cost of the failures that a detector reports, checkpoints and restarts, is
simulated in ``cl.checkpointing.sim``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import simpy

from clusterlab.core.validate import check_float, check_int
from clusterlab.models.failures import (
    heartbeat_detection_time,
    heartbeat_false_alarm_rate,
)


@dataclass(frozen=True)
class HeartbeatParams:
    """One detector and its network.

    Attributes:
        interval_s: seconds between heartbeats (> 0).
        base_delay_s: fixed part of a heartbeat's delay, seconds (>= 0).
        jitter_s: mean of the exponential part of the delay, seconds (>= 0).
        loss: probability a heartbeat is lost, in [0, 0.9].
        timeout_s: seconds of silence before the detector suspects (> 0).
        crash_s: when the process crashes, seconds after the start (> 0).
    """

    interval_s: float = 1.0
    base_delay_s: float = 0.01
    jitter_s: float = 0.1
    loss: float = 0.01
    timeout_s: float = 2.0
    crash_s: float = 600.0

    def __post_init__(self):
        check_float("interval_s", self.interval_s, 0.0, 3600.0, low_inclusive=False)
        check_float("base_delay_s", self.base_delay_s, 0.0, 3600.0)
        check_float("jitter_s", self.jitter_s, 0.0, 3600.0)
        check_float("loss", self.loss, 0.0, 0.9)
        check_float("timeout_s", self.timeout_s, 0.0, 86400.0, low_inclusive=False)
        check_float("crash_s", self.crash_s, 0.0, 1e7, low_inclusive=False)


def simulate(params: HeartbeatParams, seed: int = 0) -> pd.DataFrame:
    """Run the detector until it suspects the crashed process; return every event.

    The first heartbeat leaves at a random phase in ``[0, interval_s)`` so that
    the crash falls at a random point of an interval.

    Args:
        params: the detector and network.
        seed: seeds the generator for phase, delays and losses.

    Returns:
        A DataFrame with one row per event: ``time_s``, ``event`` (``sent``,
        ``lost``, ``arrived``, ``crash``, ``suspect``, ``trust``), ``heartbeat``
        (index, or -1) and ``alive`` (whether the process was alive then).
    """
    check_int("seed", seed, 0)
    rng = np.random.default_rng(seed)
    p = params
    env = simpy.Environment()
    rows = []
    state = {"last": 0.0, "suspected": False}

    def log(event, beat=-1):
        rows.append((env.now, event, beat, env.now < p.crash_s))

    def deliver(beat):
        if rng.random() < p.loss:
            log("lost", beat)
            return
        yield env.timeout(p.base_delay_s + rng.exponential(p.jitter_s))
        log("arrived", beat)
        state["last"] = max(state["last"], env.now)
        if state["suspected"]:
            state["suspected"] = False
            log("trust")
        env.process(check(state["last"] + p.timeout_s))

    def check(deadline):
        yield env.timeout(deadline - env.now)
        silent = env.now - state["last"] >= p.timeout_s - 1e-12
        if silent and not state["suspected"]:
            state["suspected"] = True
            log("suspect")

    def sender():
        yield env.timeout(rng.uniform(0.0, p.interval_s))
        beat = 0
        while env.now < p.crash_s:
            log("sent", beat)
            env.process(deliver(beat))
            beat += 1
            yield env.timeout(p.interval_s)

    def crash():
        yield env.timeout(p.crash_s)
        log("crash")

    env.process(sender())
    env.process(crash())
    env.process(check(p.timeout_s))  # silence from the very start counts too
    env.run()  # every process ends: no heartbeats after the crash, no checks left
    return pd.DataFrame(rows, columns=["time_s", "event", "heartbeat", "alive"])


def heartbeat_summary(events: pd.DataFrame) -> dict:
    """False alarms and detection time from ``simulate``'s events.

    Returns:
        ``false_alarms`` (suspicions of the live process), ``watched_s`` (seconds
        it was alive), ``false_alarm_rate_per_s`` and ``detection_time_s``
        (crash to the last suspicion; 0 if it was already suspected).
    """
    crash_s = float(events.loc[events["event"] == "crash", "time_s"].iloc[0])
    suspects = events[events["event"] == "suspect"]
    false = int(suspects["alive"].sum())
    final = float(suspects["time_s"].iloc[-1])
    return {
        "false_alarms": false,
        "watched_s": crash_s,
        "false_alarm_rate_per_s": false / crash_s,
        "detection_time_s": max(final - crash_s, 0.0),
    }


def heartbeat_sweep(
    params: HeartbeatParams,
    timeouts_s,
    seed: int = 0,
    *,
    n_heartbeats: int = 100_000,
    n_crashes: int = 5_000,
    lookback: int = 40,
) -> pd.DataFrame:
    """False-alarm rate and detection time for many timeouts, vectorised.

    One long stream of ``n_heartbeats`` heartbeats gives the false alarms: a
    suspicion starts at every gap between consecutive arrivals (in time order)
    longer than the timeout. ``n_crashes`` independent crashes give the detection
    time: the last arrival among the ``lookback`` heartbeats sent before the
    crash, plus the timeout, minus the crash time (0 if already suspected).

    Args:
        params: the detector and network (its ``timeout_s`` is not used).
        timeouts_s: timeouts to evaluate, seconds (> 0).
        seed: seeds the generator (the same draws serve every timeout).

    Returns:
        One row per timeout: ``timeout_s``, ``false_alarm_rate_per_s``,
        ``detection_time_s`` (mean), ``detection_p99_s``, and the closed forms
        ``model_false_alarm_rate_per_s`` and ``model_detection_time_s``.
    """
    t = np.asarray(timeouts_s, dtype=float).ravel()
    if t.size == 0 or np.any(~np.isfinite(t)) or np.any(t <= 0):
        raise ValueError(f"timeouts_s={timeouts_s!r} must be finite numbers > 0")
    check_int("n_heartbeats", n_heartbeats, 100, 10**8)
    check_int("n_crashes", n_crashes, 10, 10**7)
    check_int("lookback", lookback, 1, 10_000)
    check_int("seed", seed, 0)
    rng = np.random.default_rng(seed)
    p = params
    dt = p.interval_s

    def arrivals(shape):
        delay = p.base_delay_s + rng.exponential(p.jitter_s, shape)
        lost = rng.random(shape) < p.loss
        return np.where(lost, -np.inf, delay)

    stream = np.arange(n_heartbeats) * dt + arrivals(n_heartbeats)
    stream = np.sort(stream[np.isfinite(stream)])
    gaps = np.sort(np.diff(stream))
    watched_s = stream[-1] - stream[0]
    alarms = gaps.size - np.searchsorted(gaps, t, side="right")

    # Crash at u in [0, dt) after heartbeat 0; heartbeats 0, -1, ... were sent.
    u = rng.uniform(0.0, dt, n_crashes)
    sent = -dt * np.arange(lookback)
    last = (sent + arrivals((n_crashes, lookback))).max(axis=1)
    detect = np.maximum(last[:, None] + t[None, :] - u[:, None], 0.0)
    return pd.DataFrame(
        {
            "timeout_s": t,
            "false_alarm_rate_per_s": alarms / watched_s,
            "detection_time_s": detect.mean(axis=0),
            "detection_p99_s": np.quantile(detect, 0.99, axis=0),
            "model_false_alarm_rate_per_s": heartbeat_false_alarm_rate(
                t, dt, p.jitter_s, p.loss
            ),
            "model_detection_time_s": heartbeat_detection_time(
                t, dt, p.base_delay_s, p.jitter_s, p.loss
            ),
        }
    )


def heartbeat_grid(
    params: HeartbeatParams,
    timeouts_s,
    jitters_ms=(50, 100, 150, 200, 250, 300),
    losses_pct=(0, 2, 4, 6, 8, 10),
    seed: int = 0,
    *,
    n_heartbeats: int = 20_000,
    n_crashes: int = 1_000,
) -> pd.DataFrame:
    """``heartbeat_sweep`` for every jitter and loss of a grid (for sliders).

    Args:
        params: the detector (its jitter and loss are replaced by the grid's).
        timeouts_s: timeouts, seconds.
        jitters_ms: mean jitters, whole milliseconds, evenly spaced.
        losses_pct: loss rates, whole percent in [0, 90], evenly spaced.

    Returns:
        The sweeps stacked, with integer columns ``jitter_ms`` and ``loss_pct``.
    """
    parts = []
    for jitter in jitters_ms:
        for loss in losses_pct:
            check_int("jitter_ms", jitter, 0, 10**6)
            check_int("loss_pct", loss, 0, 90)
            p = replace(params, jitter_s=jitter / 1e3, loss=loss / 100)
            sweep = heartbeat_sweep(
                p, timeouts_s, seed, n_heartbeats=n_heartbeats, n_crashes=n_crashes
            )
            parts.append(sweep.assign(jitter_ms=jitter, loss_pct=loss))
    return pd.concat(parts, ignore_index=True)


def detector_example(seed: int = 1) -> pd.DataFrame:
    """The run the failure-detector diagram draws, its timeout in ``attrs``.

    1 s heartbeats over a network with 50 ms delay, 0.3 s jitter and 20% loss;
    a 2 s timeout; the worker crashes at 12 s.
    """
    p = HeartbeatParams(
        interval_s=1.0,
        base_delay_s=0.05,
        jitter_s=0.3,
        loss=0.2,
        timeout_s=2.0,
        crash_s=12.0,
    )
    events = simulate(p, seed)
    events.attrs["timeout_s"] = p.timeout_s
    return events


__all__ = [
    "detector_example",
    "HeartbeatParams",
    "heartbeat_grid",
    "heartbeat_summary",
    "heartbeat_sweep",
    "simulate",
]
