"""One Raft replica (``pysyncobj``) driven by JSON lines on stdin and stdout.

``cl.control_plane.raft`` starts one such process per replica, on loopback::

    python raft_replica.py 127.0.0.1:4321 127.0.0.1:4322,127.0.0.1:4323 \\
        --min-timeout-s 0.4 --max-timeout-s 0.8 --journal /tmp/r0.journal

Each replica holds a replicated dictionary. A request is one JSON object per
line with an ``id`` and an ``op``: ``put`` (``key``, ``value``, ``timeout_s``),
``status``, ``data`` or ``block`` (``peers``: addresses whose messages this
replica drops from now on, in both directions: a network partition). Each
request is answered on its own thread, so a write that waits for a majority
does not stop the replica from answering ``status``. Besides the answers, the
replica prints an ``event`` line each time its Raft state changes, stamped
with the system-wide monotonic clock (the same clock in every process).

The file imports only ``pysyncobj`` (when it runs) and the standard library, so
that a replica starts in a fraction of a second.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

STATES = {0: "follower", 1: "candidate", 2: "leader"}


_out_lock = threading.Lock()


_blocked: set = set()


#: How often each replica's loop runs (pysyncobj's ``autoTickPeriod``), seconds:
#: a timeout that expired is noticed at the next tick.
AUTO_TICK_S = 0.01


def emit(obj: dict) -> None:
    """Write one JSON line (one write, under a lock: lines never interleave)."""
    with _out_lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def partitionable_transport():
    """pysyncobj's TCP transport, dropping every message to or from a blocked peer."""
    from pysyncobj.transport import TCPTransport

    class PartitionableTransport(TCPTransport):
        def send(self, node, message):
            if node.address in _blocked:
                return False
            return super().send(node, message)

        def _onMessageReceived(self, node, message):
            if node.address in _blocked:
                return
            super()._onMessageReceived(node, message)

    return PartitionableTransport


def _status(obj) -> dict:
    s = obj.getStatus()
    leader = s["leader"]
    return {
        "state": STATES.get(s["state"], str(s["state"])),
        "leader": None if leader is None else leader.address,
        "term": s["raft_term"],
        "commit_idx": s["commit_idx"],
        "log_len": s["log_len"],
        "has_quorum": s["has_quorum"],
    }


def _answer(obj, data, req: dict) -> None:
    out = {"id": req.get("id")}
    try:
        op = req["op"]
        if op == "put":
            start = time.monotonic()
            try:
                data.set(req["key"], req["value"], sync=True, timeout=req["timeout_s"])
                out.update(ok=True, error="")
            except Exception as err:  # pysyncobj's timeout or "not leader"
                out.update(ok=False, error=f"{type(err).__name__}: {err}")
            out["latency_s"] = time.monotonic() - start
        elif op == "status":
            out.update(_status(obj))
        elif op == "data":
            out["data"] = dict(data.items())
        elif op == "block":
            _blocked.clear()
            _blocked.update(req["peers"])
            out["blocked"] = sorted(_blocked)
        else:
            out["error"] = f"unknown op {op!r}"
    except Exception as err:  # an answer, never a dead replica
        out["error"] = f"{type(err).__name__}: {err}"
    emit(out)


def main() -> None:
    """Start the replica, then answer requests until stdin closes."""
    from pysyncobj import SyncObj, SyncObjConf
    from pysyncobj.batteries import ReplDict

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("self_addr")
    ap.add_argument("peers")
    ap.add_argument("--min-timeout-s", type=float, default=0.4)
    ap.add_argument("--max-timeout-s", type=float, default=0.8)
    ap.add_argument("--heartbeat-s", type=float, default=0.05)
    ap.add_argument("--journal", default=None)
    ap.add_argument("--batch", action="store_true", help="send at heartbeats only")
    args = ap.parse_args()

    holder: list = []  # the SyncObj, once built (callbacks come from its ticks)

    def changed(old, new):
        term = holder[0].raftCurrentTerm if holder else -1
        emit(
            {
                "event": "state",
                "state": STATES.get(new, str(new)),
                "term": term,
                "t": time.monotonic(),
            }
        )

    conf = SyncObjConf(
        raftMinTimeout=args.min_timeout_s,
        raftMaxTimeout=args.max_timeout_s,
        appendEntriesPeriod=args.heartbeat_s,
        autoTickPeriod=AUTO_TICK_S,
        appendEntriesUseBatch=args.batch,
        connectionRetryTime=0.2,
        connectionTimeout=1.0,
        leaderFallbackTimeout=2 * args.max_timeout_s,
        journalFile=args.journal,
        dynamicMembershipChange=False,
        onStateChanged=changed,
    )
    data = ReplDict()
    obj = SyncObj(
        args.self_addr,
        args.peers.split(","),
        conf=conf,
        consumers=[data],
        transportClass=partitionable_transport(),
    )
    holder.append(obj)
    emit({"event": "started", "t": time.monotonic()})
    try:
        for line in sys.stdin:
            if line.strip():
                req = json.loads(line)
                threading.Thread(
                    target=_answer, args=(obj, data, req), daemon=True
                ).start()
    finally:
        obj.destroy()


if __name__ == "__main__":
    main()
