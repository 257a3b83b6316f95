"""Heartbeats between real processes, judged by two failure detectors.

Every rank sends a small UDP datagram to every other rank on loopback every
``interval_s``, carrying the sender's wall-clock timestamp, and keeps two
detectors of each peer, fed the same heartbeats:

* ``WallClockDetector`` subtracts the timestamp in the last heartbeat from its
  own wall clock and suspects the peer when the difference exceeds
  ``timeout_s``. That compares two machines' clocks, so skew enters: a
  receiver whose clock is ahead of the sender's by more than the margin
  ``timeout_s - interval_s`` suspects a live peer once in every interval.
* ``MonotonicDetector`` times the silence itself, on its own monotonic clock,
  from when the last heartbeat *arrived*. It never reads the sender's clock,
  so no skew can reach it.

Each rank's wall clock is a ``SkewedClock``. All ranks run on one machine, so
``time.time()`` is one clock they share: the worker also stamps every heartbeat
with it, which tells a suspicion the skew caused (the heartbeat was on time)
from one the scheduler caused (the heartbeat really was late).
For the last ``silent_s`` of the run every rank stops sending, so each detector
must also suspect a peer that has really gone quiet.

Run it from a shell (rank 1's clock 17 ms ahead): ``python -m
clusterlab.clocks.heartbeats``. Checking and re-measuring are in
``heartbeat_check``.
"""

from __future__ import annotations

import select
import socket
import struct
import time

import pandas as pd
import torch.distributed as dist

from clusterlab.clocks.ranks import SkewedClock, _per_rank
from clusterlab.core.launcher import launch
from clusterlab.core.validate import check_float, check_int

#: A heartbeat counts as late (the machine was busy) when the freshest one a
#: receiver holds is older than the timeout less this, on the shared clock.
LATE_TOLERANCE_S = 1e-3


_HEARTBEAT = struct.Struct("!iqdd")  # sender, sequence, wall stamp, true stamp


class WallClockDetector:
    """Suspect a peer whose last timestamp is older than ``timeout_s`` by my clock.

    Args:
        timeout_s: seconds of apparent silence before suspecting.
        clock: this rank's wall clock, a function returning seconds.
    """

    name = "wall clock"

    def __init__(self, timeout_s: float, clock):
        self.timeout_s, self.clock, self.last = timeout_s, clock, {}

    def heard(self, peer: int, stamp_s: float) -> None:
        """Record a heartbeat from ``peer`` carrying the sender's ``stamp_s``."""
        self.last[peer] = stamp_s

    def age_s(self, peer: int) -> float:
        """Seconds since ``peer``'s last heartbeat, as this detector sees it."""
        return self.clock() - self.last[peer]

    def suspects(self, peer: int) -> bool:
        """Whether ``peer`` is suspected now (False before any heartbeat)."""
        return peer in self.last and self.age_s(peer) > self.timeout_s


class MonotonicDetector(WallClockDetector):
    """Suspect a peer when no heartbeat has arrived for ``timeout_s``.

    The sender's stamp is ignored: the silence is timed from the arrival, on
    this rank's own monotonic clock, which nothing outside the machine sets.
    """

    name = "monotonic"

    def __init__(self, timeout_s: float, clock=time.monotonic):
        super().__init__(timeout_s, clock)

    def heard(self, peer: int, stamp_s: float) -> None:
        """Record that a heartbeat from ``peer`` arrived now."""
        self.last[peer] = self.clock()


DETECTORS = {"wall clock": WallClockDetector, "monotonic": MonotonicDetector}


def heartbeat_worker(
    rank: int,
    world_size: int,
    *,
    offsets_s=None,
    interval_s: float = 0.02,
    timeout_s: float = 0.035,
    live_s: float = 1.0,
    silent_s: float = 0.2,
    tick_s: float = 1e-3,
    detectors=None,
) -> list[dict]:
    """One rank: send heartbeats, judge every peer with every detector.

    Args:
        offsets_s: each rank's wall-clock offset, in seconds (default all 0).
        interval_s, timeout_s: the heartbeat period and the detectors' timeout.
        live_s, silent_s: how long the ranks send, then how long they go quiet.
        tick_s: how often the detectors are asked, besides at every arrival.
        detectors: name -> class taking ``(timeout_s, wall_clock)``; default
            ``DETECTORS``.

    Returns:
        One dict per (detector, peer); see ``run_heartbeats``.
    """
    offsets = _per_rank("offsets_s", offsets_s, world_size)
    clock = SkewedClock(offsets[rank])
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    ports, starts = [None] * world_size, [None] * world_size
    dist.all_gather_object(ports, sock.getsockname()[1])
    dist.all_gather_object(starts, time.time())
    start = max(starts) + 0.05  # one schedule on the shared clock
    silent_at, end = start + live_s, start + live_s + silent_s
    peers = [p for p in range(world_size) if p != rank]
    kinds = (detectors or DETECTORS).items()
    dets = {name: cls(timeout_s, clock.now) for name, cls in kinds}
    zero = dict(heartbeats=0, false_suspicions=0, clock_suspicions=0)
    st = {
        (n, p): dict(zero, worst_true_age_s=0.0, on=False, since=0.0)
        for n in dets
        for p in peers
    }
    sent_true: dict[int, float] = {}

    def judge():
        t = time.time()
        for peer in sent_true:
            age = t - sent_true[peer]
            for name, det in dets.items():
                s, suspects = st[name, peer], det.suspects(peer)
                if suspects and not s["on"]:
                    s["since"] = t
                    if t < silent_at:  # the peer was still sending
                        s["false_suspicions"] += 1
                        on_time = age <= timeout_s - LATE_TOLERANCE_S
                        s["clock_suspicions"] += on_time
                if t < silent_at:
                    s["worst_true_age_s"] = max(s["worst_true_age_s"], age)
                s["on"] = suspects

    time.sleep(max(0.0, start - time.time()))
    seq, next_send = 0, time.monotonic()
    heard_m = time.monotonic()  # when this rank last received anything
    # Listen until the silence has lasted silent_s here too: a rank the
    # scheduler held up may drain old heartbeats after the others went quiet.
    while (now := time.time()) < end or (
        time.monotonic() - heard_m < silent_s and now < end + 10 * silent_s
    ):
        if now < silent_at and time.monotonic() >= next_send:
            t = time.time()
            msg = _HEARTBEAT.pack(rank, seq, clock.at(t), t)
            for p in peers:
                sock.sendto(msg, ("127.0.0.1", ports[p]))
            # Timed from the send, so two heartbeats are never closer than this.
            seq, next_send = seq + 1, time.monotonic() + interval_s
        wait = tick_s
        if now < silent_at:
            wait = max(0.0, min(tick_s, next_send - time.monotonic()))
        select.select([sock], [], [], wait)
        judge()
        while True:
            try:
                peer, _, stamp, true_s = _HEARTBEAT.unpack(sock.recv(64))
            except BlockingIOError:
                break
            judge()  # just before it arrives: was the peer suspected?
            for det in dets.values():
                det.heard(peer, stamp)
            sent_true[peer], heard_m = true_s, time.monotonic()
            for name in dets:
                st[name, peer]["heartbeats"] += true_s < silent_at
    judge()
    sock.close()
    rows = []
    for (name, peer), s in st.items():
        detected = s["on"] and peer in sent_true
        after = s["since"] - sent_true[peer] if detected else float("nan")
        rows.append(
            dict(
                observer=rank,
                peer=peer,
                detector=name,
                lead_s=offsets[rank] - offsets[peer],
                **{k: s[k] for k in zero},
                late_suspicions=s["false_suspicions"] - s["clock_suspicions"],
                worst_true_age_s=s["worst_true_age_s"],
                detected=bool(detected),
                detect_after_s=after,
            )
        )
    return rows


def run_heartbeats(
    offsets_s=(0.0, 17e-3),
    *,
    interval_s: float = 0.02,
    timeout_s: float = 0.035,
    live_s: float = 1.0,
    silent_s: float = 0.2,
    detectors=None,
    timeout: float = 30.0,
) -> pd.DataFrame:
    """Launch ``heartbeat_worker`` on one rank per offset; one row per judgement.

    Args:
        offsets_s: each rank's wall-clock offset in seconds, in [-10, 10];
            2 to 8 ranks.
        interval_s: seconds between one rank's heartbeats, in [0.002, 1].
        timeout_s: the detectors' timeout, in (interval_s, 10] s.
        live_s: seconds of heartbeats, in [0.05, 60].
        silent_s: seconds of silence after them, in (timeout_s, 60].
        detectors: name -> detector class (default ``DETECTORS``).
        timeout: the launch's timeout in seconds.

    Returns:
        A DataFrame, one row per observer, peer and detector: ``lead_s`` (the
        observer's clock minus the peer's), ``heartbeats`` received while the
        peer was live, ``false_suspicions`` of the live peer,
        ``clock_suspicions`` (those raised while its heartbeats were on time:
        the clocks' doing) and ``late_suspicions`` (the rest: the machine's),
        ``worst_true_age_s`` (the oldest the freshest heartbeat got, on the
        shared clock), ``detected`` (suspected at the end, after the silence)
        and ``detect_after_s`` (from the peer's last heartbeat to that
        suspicion); plus ``skew_s``, ``interval_s``, ``timeout_s`` and
        ``margin_s`` (``timeout_s - interval_s``).
    """
    offsets = [check_float("offsets_s", o, -10.0, 10.0) for o in offsets_s]
    check_int("len(offsets_s)", len(offsets), 2, 8)
    check_float("interval_s", interval_s, 0.002, 1.0)
    check_float("timeout_s", timeout_s, interval_s, 10.0, low_inclusive=False)
    check_float("live_s", live_s, 0.05, 60.0)
    check_float("silent_s", silent_s, timeout_s, 60.0, low_inclusive=False)
    out = launch(
        heartbeat_worker,
        len(offsets),
        backend="gloo",  # only to swap ports; the heartbeats are UDP
        timeout=timeout,
        offsets_s=offsets,
        interval_s=interval_s,
        timeout_s=timeout_s,
        live_s=live_s,
        silent_s=silent_s,
        detectors=detectors,
    )
    return pd.DataFrame([row for rows in out for row in rows]).assign(
        skew_s=max(offsets) - min(offsets),
        interval_s=interval_s,
        timeout_s=timeout_s,
        margin_s=timeout_s - interval_s,
    )


if __name__ == "__main__":
    cols = ["observer", "peer", "detector", "lead_s", "heartbeats"]
    cols += ["false_suspicions", "clock_suspicions", "detect_after_s"]
    print(run_heartbeats()[cols].round(4).to_string(index=False))


__all__ = [
    "DETECTORS",
    "LATE_TOLERANCE_S",
    "MonotonicDetector",
    "WallClockDetector",
    "heartbeat_worker",
    "run_heartbeats",
]
