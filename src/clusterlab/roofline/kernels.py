"""Kernels of the per-record workloads: serving, a key-value store, preprocessing,
analytics and crawling, each timed phase by phase (see ``perf.workloads``).

Each kernel is ``kernel(clock, records, folder)``: it makes its data (not
timed), calls ``clock.start()``, then charges socket and file calls to ``io``,
per-record Python code to ``branchy`` and array work to ``stream``.
"""

from __future__ import annotations

import json
import os
import random
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin

from clusterlab.roofline.phase_clock import (
    Clock,
    cold_file,
    read_file,
    socket_pair,
    write_durably,
)

_WORDS = "the a of gpu cpu data node disk net fast slow job run step read".split()


def serving(c: Clock, n: int, folder: str) -> None:
    """JSON orders over a socket, priced from a catalogue and answered."""
    r = random.Random(0)
    catalogue = {f"sku{i}": (round(r.uniform(1, 100), 2), 50) for i in range(2000)}
    reqs = [
        json.dumps(
            {
                "user": r.randrange(10**6),
                "coupon": r.choice([None, "TEN", "FREESHIP"]),
                "items": [
                    {"sku": f"sku{r.randrange(2100)}", "qty": r.randrange(1, 60)}
                    for _ in range(r.randrange(1, 6))
                ],
            }
        ).encode()
        for _ in range(n)
    ]
    cli, srv = socket_pair()
    c.start()
    for req in reqs:
        cli.send(req)
        body = srv.recv(65536)
        c.lap("io")
        order, total, missing = json.loads(body), 0.0, []
        for item in order["items"]:
            entry = catalogue.get(item["sku"])
            if entry is None:
                missing.append(item["sku"])
            elif item["qty"] > entry[1]:
                missing.append(item["sku"] + ": not enough stock")
            else:
                total += entry[0] * item["qty"]
                c.flop += 2
        if order["coupon"] == "TEN" and total > 50:
            total, c.flop = total * 0.9, c.flop + 1
        resp = json.dumps({"total": round(total, 2), "missing": missing}).encode()
        c.bytes += len(req) + len(resp)
        c.lap("branchy")
        srv.send(resp)
        cli.recv(65536)
        c.messages += 2
        c.lap("io")
    cli.close()
    srv.close()


def kv_store(c: Clock, n: int, folder: str) -> None:
    """GET and SET over sockets; each SET goes to two followers' logs first.

    A SET is answered only after both followers have appended it to their
    logs and acknowledged (with the leader, every replica agrees: the
    message pattern of a consensus log's commit).
    """
    r = random.Random(1)
    cmds = [
        f"SET k{r.randrange(5000)} {r.randrange(10**9)}"
        if r.random() < 0.2
        else f"GET k{r.randrange(5000)}"
        for _ in range(n)
    ]
    client, leader = socket_pair()
    followers = [socket_pair() for _ in range(2)]
    data, logs = {}, [[], []]
    c.start()
    for cmd in cmds:
        client.send(cmd.encode())
        raw = leader.recv(4096)
        c.lap("io")
        op, key, *rest = raw.decode().split(" ")
        if op == "SET":  # replicate, collect the acknowledgements, then apply
            entry = f"APPEND {len(logs[0])} {key} {rest[0]}".encode()
            c.lap("branchy")
            for mine, _ in followers:
                mine.send(entry)
            got = [theirs.recv(4096) for _, theirs in followers]
            c.lap("io")
            acks = []
            for log, e in zip(logs, got, strict=True):
                _, idx, k, v = e.decode().split(" ")
                if int(idx) == len(log):  # the follower's log has no gap
                    log.append((k, v))
                    acks.append(b"ACK " + idx.encode())
            c.lap("branchy")
            for (mine, theirs), ack in zip(followers, acks, strict=True):
                theirs.send(ack)
                mine.recv(64)
            c.messages += 4
            c.lap("io")
            data[key] = rest[0]
            reply, c.bytes = b"+OK", c.bytes + 2 * len(entry) + 2 * len(acks[0])
        else:
            reply = data.get(key, "").encode() or b"$-1"
        c.bytes += len(raw) + len(reply)
        c.lap("branchy")
        leader.send(reply)
        client.recv(4096)
        c.messages += 2
        c.lap("io")
    for s in (client, leader, *(x for pair in followers for x in pair)):
        s.close()


def _raw_csv(n: int) -> bytes:
    r = random.Random(2)
    lines = []
    for i in range(n):
        text = " ".join(r.choice(_WORDS).upper() for _ in range(r.randrange(3, 12)))
        lines.append(f"{i},{text},{r.gauss(50, 10):.3f}" if r.random() > 0.05 else "")
    return "\n".join(lines).encode()


def preprocessing(c: Clock, n: int, folder: str) -> list:
    """A CSV file read from disk, cleaned and tokenised, written back durably.

    Returns:
        The token ids, for the pipeline kernel to train on.
    """
    path = cold_file(folder, "raw.csv", _raw_csv(n))
    c.start()
    raw = read_file(c, path).decode()
    vocab, stop, out, values, ids = {}, {"the", "a", "of"}, [], [], []
    for line in raw.split("\n"):
        parts = line.split(",")
        if len(parts) != 3 or not parts[1]:
            continue  # a malformed or empty record
        words = [w for w in parts[1].lower().split() if w not in stop]
        toks = [vocab.setdefault(w, len(vocab)) for w in words]
        ids.extend(toks)
        values.append(float(parts[2]))
        out.append(" ".join(map(str, toks)))
    mean = sum(values) / len(values)
    c.flop += 3 * len(values)
    scaled = [f"{(v - mean) / 10:.3f}" for v in values]
    blob = "\n".join(f"{a}\t{b}" for a, b in zip(out, scaled, strict=True)).encode()
    write_durably(c, os.path.join(folder, "clean.tsv"), blob)
    return ids


def analytics(c: Clock, n: int, folder: str) -> None:
    """Events over a socket, counted per (kind, page), latencies summarised."""
    import numpy as np

    r = random.Random(3)
    kinds = ("view", "click", "buy")
    events = [
        json.dumps(
            {
                "kind": r.choice(kinds),
                "page": r.randrange(300),
                "ms": r.expovariate(0.1),
            }
        ).encode()
        for _ in range(n)
    ]
    src, sink = socket_pair()
    counts, window, summaries = {}, [], []
    c.start()
    for ev in events:
        src.send(ev)
        raw = sink.recv(4096)
        c.messages += 1
        c.lap("io")
        e = json.loads(raw)
        key = (e["kind"], e["page"])
        counts[key] = counts.get(key, 0) + 1
        if e["kind"] != "view":
            window.append(e["ms"])
        c.bytes += len(raw)
        c.lap("branchy")
        if len(window) == 256:  # a window's summary: mean, spread, p99
            lat = np.asarray(window)
            summaries.append((lat.mean(), lat.std(), np.percentile(lat, 99)))
            c.flop += 5 * lat.size
            c.bytes += 3 * lat.nbytes
            window.clear()
            c.lap("stream")
    src.close()
    sink.close()


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            href = dict(attrs).get("href")
            if href and not href.startswith(("mailto:", "javascript:")):
                self.links.append(href)


def crawler(c: Clock, n: int, folder: str) -> None:
    """HTML pages read from disk (in place of the network), links extracted."""
    r = random.Random(4)
    paths = []
    for i in range(n):
        body = "".join(
            f"<p>{' '.join(r.choices(_WORDS, k=8))} <a href='/p{r.randrange(n)}"
            f"#s{r.randrange(3)}'>link</a></p>"
            for _ in range(r.randrange(5, 20))
        )
        page = f"<html><head><title>p{i}</title></head><body>{body}</body></html>"
        paths.append(cold_file(folder, f"p{i}.html", page.encode()))
    seen, frontier = set(), []
    c.start()
    for i, path in enumerate(paths):
        parser = _Links()
        parser.feed(read_file(c, path).decode())
        for href in parser.links:
            url, _ = urldefrag(urljoin(f"https://example.org/p{i}", href))
            if url not in seen:
                seen.add(url)
                frontier.append(url)
        c.lap("branchy")


#: Workload name -> kernel.
RECORD_KERNELS = {
    "web serving": serving,
    "data preprocessing": preprocessing,
    "real-time analytics": analytics,
    "key-value store (Redis)": kv_store,
    "web crawler": crawler,
}


__all__ = ["RECORD_KERNELS"]
