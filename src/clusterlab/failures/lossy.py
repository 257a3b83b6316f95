"""A heartbeat failure detector across a lossy link between two emulated nodes.

Node 1 sends a UDP heartbeat to node 0 every ``interval_ms``, each stamped with
its sequence number; node 1's link drops ``loss_percent`` of its packets at random
(``cl.cluster``'s nftables rule). Node 0 records each arrival. A detector with
timeout T suspects the sender whenever T passes without a heartbeat, so every
gap between two arrivals longer than T is one false suspicion of a live
process: ``false_alarms`` counts them from the arrival times for many timeouts at
once, and ``model_table`` sets each count against ``cl.models.failures``'s
closed form, fed the loss and the jitter measured in the same run.

The two programs run inside the nodes::

    python -m clusterlab.failures.lossy listen --bind ADDR --port P --seconds S \
        --out FILE
    python -m clusterlab.failures.lossy send --to ADDR --port P --interval-ms D \
        --count N

Both bind only the node's own address. ``heartbeats_over_loss`` builds the
cluster, runs both and removes everything; where no cluster can be emulated,
``measure_or_recorded`` returns the book's recorded run from ``data/``.
"""

from __future__ import annotations

import argparse
import json
import math
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from clusterlab.core.validate import check_float, check_int

PACKET = struct.Struct("!Id")  # sequence number, scheduled send time (monotonic)
TABLE = "heartbeat_runs"
#: The book's run: node 1's link drops 30% of its packets, a heartbeat leaves
#: every 20 ms for 8 s; the timeouts lie between multiples of the interval, so a
#: millisecond or two of jitter moves no gap across one.
EXPERIMENT = {"loss_percent": 30.0, "interval_ms": 20.0, "seconds": 8.0}
TIMEOUTS_MS = (30.0, 50.0, 70.0, 90.0)
COLUMNS = ["timeout_ms", "interval_ms", "loss_percent", "sent", "delivered",
           "seconds", "jitter_ms", "false_alarms"]  # fmt: skip


def _send(to: str, port: int, interval_s: float, count: int) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    start = time.monotonic() + 0.05
    for seq in range(count):
        due = start + seq * interval_s  # a fixed schedule: lateness never adds up
        time.sleep(max(0.0, due - time.monotonic()))
        try:
            sock.sendto(PACKET.pack(seq, due), (to, port))
        except OSError:  # the node's own rule dropped it on the way out
            pass
    sock.close()


def _listen(bind: str, port: int, seconds: float, out: str) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((bind, port))
    sock.settimeout(0.2)
    rows, end = [], time.monotonic() + seconds
    Path(out + ".ready").write_text("1")
    while time.monotonic() < end:
        try:
            data, _ = sock.recvfrom(64)
        except TimeoutError:
            continue
        seq, due = PACKET.unpack(data[: PACKET.size])
        rows.append((seq, due, time.monotonic()))
    sock.close()
    Path(out).write_text(json.dumps(rows))


def heartbeats_over_loss(
    *,
    loss_percent: float = 30.0,
    interval_ms: float = 20.0,
    seconds: float = 8.0,
    rate_mbit: float = 100.0,
    timeout_s: float = 60.0,
) -> dict:
    """Send heartbeats from node 1 to node 0 across a lossy link; return arrivals.

    Args:
        loss_percent: packets node 1's link drops, in [0, 90].
        interval_ms: the heartbeat interval, in [2, 1000].
        seconds: how long heartbeats are sent, in [1, 600].
        rate_mbit: the link's rate, Mbit/s (heartbeats are tiny).
        timeout_s: the whole run's limit.

    Returns:
        ``arrivals`` (``seq, due, received``: seconds on the shared monotonic
        clock), ``sent``, ``interval_s``, ``loss_percent``, ``seconds`` and
        ``cluster_id`` (the emulated cluster's, removed by then).
    """
    from clusterlab.cluster.emulated import EmulatedCluster
    from clusterlab.cluster.topology import Topology

    loss_percent = check_float("loss_percent", loss_percent, 0.0, 90.0)
    interval_s = check_float("interval_ms", interval_ms, 2.0, 1000.0) / 1000
    seconds = check_float("seconds", seconds, 1.0, 600.0)
    count = int(seconds / interval_s)
    folder = Path(tempfile.mkdtemp(prefix="heartbeats-"))
    out = str(folder / "arrivals.json")
    port = 29_400
    me = [sys.executable, "-m", "clusterlab.failures.lossy"]
    with EmulatedCluster(Topology(nodes=2, rate_mbit=rate_mbit)) as c:
        c.loss([1], loss_percent)
        listen = c.popen(0, [*me, "listen", "--bind", c.address(0), "--port", port,
                             "--seconds", seconds + 1.5, "--out", out])  # fmt: skip
        deadline = time.monotonic() + timeout_s
        try:
            while not Path(out + ".ready").exists():
                if listen.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the listener on node 0 did not start")
                time.sleep(0.02)
            send = c.popen(1, [*me, "send", "--to", c.address(0), "--port",
                               port, "--interval-ms", interval_ms, "--count",
                               count])  # fmt: skip
            send.wait(timeout=max(1.0, deadline - time.monotonic()))
            listen.wait(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            for p in (locals().get("send"), listen):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait()
        cluster_id = c.id
    if listen.returncode != 0 or not Path(out).exists():
        raise RuntimeError(f"the listener on node 0 failed (code {listen.returncode})")
    rows = json.loads(Path(out).read_text())
    return {
        "arrivals": pd.DataFrame(rows, columns=["seq", "due", "received"]),
        "sent": count,
        "interval_s": interval_s,
        "loss_percent": loss_percent,
        "seconds": seconds,
        "cluster_id": cluster_id,
    }


def false_alarms(run: dict, timeouts_ms) -> pd.DataFrame:
    """Count a detector's false suspicions for each timeout, from the arrivals.

    Returns:
        ``COLUMNS``: per timeout, the heartbeats sent and delivered, the run's
        length, the jitter (the mean of each arrival's lateness past the
        earliest one, relative to its scheduled send) and the false alarms
        (gaps between arrivals longer than the timeout).
    """
    a = run["arrivals"].sort_values("received")
    gaps = np.diff(a["received"].to_numpy())
    late = (a["received"] - a["due"]).to_numpy()
    jitter = float(np.mean(late - late.min())) if len(late) else 0.0
    rows = []
    for t in timeouts_ms:
        t = check_float("timeout_ms", t, 0.0, 1e5, low_inclusive=False)
        rows.append((t, run["interval_s"] * 1000, run["loss_percent"], run["sent"],
                     len(a), run["seconds"], jitter * 1000,
                     int((gaps > t / 1000).sum())))  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)


def model_table(counts: pd.DataFrame) -> pd.DataFrame:
    """Each count beside the closed form's expectation and its Poisson range.

    The closed form (``heartbeat_false_alarm_rate``) gets the loss measured in
    the run (``1 - delivered / sent``) and its jitter. The range holds a
    Poisson count of that mean with probability 0.999 at least.
    """
    from clusterlab.models.failures import heartbeat_false_alarm_rate

    out = counts.copy()
    loss = 1 - out["delivered"] / out["sent"]
    rate = [
        heartbeat_false_alarm_rate(t / 1000, d / 1000, j / 1000, p)
        for t, d, j, p in zip(out["timeout_ms"], out["interval_ms"],
                              out["jitter_ms"], loss, strict=True)
    ]  # fmt: skip
    out["measured_loss"] = loss
    out["expected"] = np.asarray(rate) * out["seconds"]
    out["low"], out["high"] = zip(
        *(poisson_range(m) for m in out["expected"]), strict=True
    )
    return out


def poisson_range(mean: float, tail: float = 0.0005) -> tuple[int, int]:
    """The counts a Poisson count of ``mean`` lies in, ``tail`` left out each side."""
    mean = check_float("mean", mean, 0.0)
    k, cdf, pmf = 0, 0.0, math.exp(-mean)
    low = None
    while True:
        cdf += pmf
        if low is None and cdf > tail:
            low = k
        if cdf >= 1 - tail:
            return low, k
        k += 1
        pmf *= mean / k


def recorded() -> pd.DataFrame:
    """The book's recorded run, with its provenance columns."""
    import clusterlab.core.published as published

    return published.load(TABLE)


def measure_or_recorded(timeouts_ms=TIMEOUTS_MS, **kwargs) -> tuple[pd.DataFrame, str]:
    """The counts measured across emulated nodes here, or the recorded ones.

    ``kwargs`` go to ``heartbeats_over_loss`` (``EXPERIMENT`` by default).
    """
    from clusterlab.cluster.recorded import here_or_recorded

    return here_or_recorded(
        lambda: false_alarms(
            heartbeats_over_loss(**{**EXPERIMENT, **kwargs}), timeouts_ms
        ),
        recorded,
        COLUMNS,
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send")
    s.add_argument("--to", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--interval-ms", type=float, required=True)
    s.add_argument("--count", type=int, required=True)
    r = sub.add_parser("listen")
    r.add_argument("--bind", required=True)
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--seconds", type=float, required=True)
    r.add_argument("--out", required=True)
    args = p.parse_args(argv)
    try:
        check_int("port", args.port, 1, 65535)
        if args.cmd == "send":
            interval = check_float("interval_ms", args.interval_ms, 2.0, 1000.0)
            _send(
                args.to, args.port, interval / 1000, check_int("count", args.count, 1)
            )
        else:
            seconds = check_float("seconds", args.seconds, 0.1, 3600.0)
            _listen(args.bind, args.port, seconds, args.out)
    except ValueError as err:
        p.error(str(err))
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["EXPERIMENT", "TIMEOUTS_MS", "false_alarms", "heartbeats_over_loss",
           "measure_or_recorded", "model_table", "poisson_range",
           "recorded"]  # fmt: skip
