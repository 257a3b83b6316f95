"""A register client for etcd: writes and reads one key, and logs what it saw.

Run by ``cl.control_plane.register`` once per member (on loopback, or inside an
emulated node)::

    python -m clusterlab.control_plane.register_client --endpoint URL \\
        --process P --start-at T --seconds S --out PATH

From the monotonic instant ``T`` (the same clock in every process and network
namespace of one machine) for ``S`` seconds it alternates a write of a value
of its own (``"P-k"``) and a read of the key, through etcd's v3 JSON gateway,
each with a timeout, and writes one JSON line per operation: ``process, kind,
value, invoke_s, complete_s, outcome``. A write the member answered is "ok"; a
write that timed out or got an error is "unknown" (it may yet commit); a write
whose connection was refused is "failed". A read is "ok" or "failed".
``--status`` instead prints the member's id and the leader it knows.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
import urllib.error
import urllib.request

KEY = "clusterlab/register"
#: After the last client's last operation, before the final read (seconds).
FINAL_PAUSE_S = 0.5
#: How long the final reads are tried for (seconds).
FINAL_TRIES_S = 10.0
#: Answered final reads each client makes, ``FINAL_GAP_S`` apart: a member
#: that answers a stale value once after the heal shows it, and what it
#: answers next.
FINAL_ANSWERS = 3
FINAL_GAP_S = 0.1


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def call(endpoint: str, path: str, body: dict, timeout_s: float) -> dict:
    """POST ``body`` to the member's v3 gateway; the answer's JSON."""
    req = urllib.request.Request(
        endpoint.rstrip("/") + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=timeout_s) as answer:
        return json.loads(answer.read() or b"{}")


def status(endpoint: str, timeout_s: float = 1.0) -> dict:
    """The member's own id and the leader it knows (ids as decimal strings)."""
    out = call(endpoint, "/v3/maintenance/status", {}, timeout_s)
    return {"member_id": out["header"]["member_id"], "leader": out.get("leader")}


def write(endpoint: str, value: str, timeout_s: float) -> None:
    call(endpoint, "/v3/kv/put", {"key": _b64(KEY), "value": _b64(value)}, timeout_s)


def read(endpoint: str, timeout_s: float) -> str | None:
    out = call(endpoint, "/v3/kv/range", {"key": _b64(KEY)}, timeout_s)
    kvs = out.get("kvs") or []
    return base64.b64decode(kvs[0]["value"]).decode() if kvs else None


def _refused(exc: Exception) -> bool:
    reason = getattr(exc, "reason", exc)
    return isinstance(reason, ConnectionRefusedError)


def run(
    endpoint,
    process,
    start_at,
    seconds,
    out,
    timeout_s=0.5,
    gap_s=0.02,
    final_read=False,
):
    """The client's loop; returns the number of operations logged.

    With ``final_read``, once every client's loop has ended, reads marked
    ``final`` until ``FINAL_ANSWERS`` have been answered (failed ones tried
    again, for up to ``FINAL_TRIES_S`` in all).
    """
    _sleep_until(start_at)
    k, n = 0, 0
    with open(out, "w") as log:
        while time.monotonic() < start_at + seconds:
            kind = "write" if k % 2 == 0 else "read"
            value = f"{process}-{k // 2}" if kind == "write" else None
            t0 = time.monotonic()
            try:
                if kind == "write":
                    write(endpoint, value, timeout_s)
                else:
                    value = read(endpoint, timeout_s)
                outcome = "ok"
            except (OSError, urllib.error.URLError, ValueError) as exc:
                if kind == "read" or _refused(exc):
                    outcome = "failed"
                else:
                    outcome = "unknown"
            rec = dict(process=process, kind=kind, value=value, invoke_s=t0)
            rec |= dict(complete_s=time.monotonic(), outcome=outcome)
            log.write(json.dumps(rec) + "\n")
            log.flush()
            k, n = k + 1, n + 1
            time.sleep(gap_s)
        if final_read:  # once every client has stopped writing: the value now
            _sleep_until(start_at + seconds + timeout_s + FINAL_PAUSE_S)
            give_up = time.monotonic() + FINAL_TRIES_S
            answered = 0
            while True:
                t0 = time.monotonic()
                try:
                    value, outcome = read(endpoint, 1.0), "ok"
                except (OSError, urllib.error.URLError, ValueError):
                    value, outcome = None, "failed"
                rec = dict(process=process, kind="read", value=value, invoke_s=t0)
                rec |= dict(complete_s=time.monotonic(), outcome=outcome, final=True)
                log.write(json.dumps(rec) + "\n")
                n += 1
                answered += outcome == "ok"
                if answered == FINAL_ANSWERS or time.monotonic() > give_up:
                    break
                time.sleep(FINAL_GAP_S)
    return n


def _sleep_until(t: float) -> None:
    while (left := t - time.monotonic()) > 0:
        time.sleep(min(left, 0.05))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m clusterlab.control_plane.register_client"
    )
    p.add_argument("--endpoint", required=True, help="a member's client URL")
    p.add_argument("--status", action="store_true", help="print id and leader")
    p.add_argument("--process", type=int, default=0)
    p.add_argument("--start-at", type=float, default=0.0, help="time.monotonic()")
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--timeout", type=float, default=0.5)
    p.add_argument("--out", default=None)
    p.add_argument("--final-read", action="store_true", help="read once at the end")
    args = p.parse_args(argv)
    if args.status:
        try:
            print(json.dumps(status(args.endpoint, args.timeout)))
        except (OSError, urllib.error.URLError, ValueError, KeyError) as exc:
            print(json.dumps({"error": str(exc)}))
            return 1
        return 0
    if args.out is None:
        p.error("--out is needed unless --status is given")
    if not 0 < args.seconds <= 600:
        p.error(f"--seconds {args.seconds} is out of range: allowed (0, 600]")
    if not 0 < args.timeout <= 60:
        p.error(f"--timeout {args.timeout} is out of range: allowed (0, 60]")
    run(
        args.endpoint,
        args.process,
        args.start_at,
        args.seconds,
        args.out,
        args.timeout,
        final_read=args.final_read,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
