"""The preflight check's arithmetic: clock offsets, rail pairs and its report.

Pure functions, run on rank 0 or in tests, so that each can be fed wrong
input: ``ntp_offset`` (one round trip's offset and error bound),
``rail_peers`` (which rank each rank sends to and receives from when the
fabric is tested rail by rail), ``report`` (the JSON the ``--json`` option
writes) and ``table`` (the text rank 0 prints).
"""

from __future__ import annotations

from clusterlab.debugging.timings import OUTLIER_RATIO, outliers

#: Test hook: per-node seconds added to the wall clock, "NODE=SECONDS,...".
SKEW_ENV = "CLUSTERLAB_PREFLIGHT_CLOCK_SKEW_S"

RULE = (
    f"slow: worse than the median by more than {OUTLIER_RATIO:g}x "
    "(rate < median / {r}, time > median x {r})".replace("{r}", f"{OUTLIER_RATIO:g}")
)


def clock_skews(spec: str | None) -> dict[int, float]:
    """Parse ``"NODE=SECONDS,..."`` into {node: seconds}; '' or None gives {}."""
    out: dict[int, float] = {}
    for part in (spec or "").split(","):
        if not part.strip():
            continue
        node, sep, secs = part.partition("=")
        try:
            out[int(node)] = float(secs)
        except ValueError:
            raise ValueError(
                f"{SKEW_ENV}={spec!r} must look like '1=0.25,2=-0.1' (NODE=SECONDS)"
            ) from None
        if not sep or abs(out[int(node)]) > 3600:
            raise ValueError(f"{SKEW_ENV}={spec!r}: offsets must be within ±3600 s")
    return out


def ntp_offset(t0: float, t1: float, t2: float, t3: float) -> tuple[float, float]:
    """NTP's offset and its error bound from one round trip, in seconds.

    ``t0``: the client sends (client clock); ``t1``: the server receives and
    ``t2``: it replies (server clock); ``t3``: the client receives (client
    clock). Whatever the two one-way delays, the true offset lies within
    ``delay / 2`` of the estimate, ``delay = (t3 - t0) - (t2 - t1)``.

    Returns:
        ``(offset_s, bound_s)``: the server's clock minus the client's.
    """
    delay = (t3 - t0) - (t2 - t1)
    if delay < 0:
        raise ValueError(f"delay={delay} < 0: t0..t3 must be in causal order")
    return ((t1 - t0) + (t2 - t3)) / 2, delay / 2


def rail_peers(nodes: list[int], local_ranks: list[int]) -> list[tuple[int, int]]:
    """Each rank's (destination, source) for a test of every rail of the fabric.

    On a GPU node each local rank has its own NIC (rail ``i`` joins the
    ``i``-th NIC of every node). A ring r -> r + 1 crosses between nodes only
    from a node's last rank to the next node's first, so it tests one NIC per
    node; here local rank ``i`` of node ``n`` sends to local rank ``i`` of
    node ``n + 1`` (and receives from node ``n - 1``), so every rail carries
    traffic at once. With one node there is no fabric: the pairs are the
    ring within the node.

    Args:
        nodes: the node of each global rank.
        local_ranks: the local rank of each global rank.

    Returns:
        ``[(dst, src), ...]`` per global rank.
    """
    if len(nodes) != len(local_ranks) or not nodes:
        raise ValueError(
            f"nodes and local_ranks must have one entry per rank, the same "
            f"number (got {len(nodes)} and {len(local_ranks)})"
        )
    where = {(n, i): r for r, (n, i) in enumerate(zip(nodes, local_ranks, strict=True))}
    if len(where) != len(nodes):
        raise ValueError(f"local_ranks={local_ranks}: repeated within a node")
    order = sorted(set(nodes))
    sizes = {n: nodes.count(n) for n in order}
    if len(set(sizes.values())) != 1:
        raise ValueError(
            f"nodes={nodes}: ranks per node {sizes} must be equal, one per rail"
        )
    rails = {n: sorted(i for m, i in where if m == n) for n in order}
    if any(r != rails[order[0]] for r in rails.values()):
        raise ValueError(f"local_ranks={local_ranks}: every node needs the same ones")
    world = len(nodes)
    if len(order) == 1:
        return [((r + 1) % world, (r - 1) % world) for r in range(world)]
    pos = {n: k for k, n in enumerate(order)}
    out = []
    for n, i in zip(nodes, local_ranks, strict=True):
        nxt, prv = order[(pos[n] + 1) % len(order)], order[pos[n] - 1]
        out.append((where[(nxt, i)], where[(prv, i)]))
    return out


def report(rows, clock, links) -> dict:
    """The JSON report from every rank's measurements (pure; run on rank 0).

    Args:
        rows: per rank, ``rank``, ``node``, ``host``, ``matmul_flops``,
            ``allreduce_busbw_Bps`` (its node's; None with one rank per node),
            and optionally ``local_rank`` and ``matmul_dtype``.
        clock: {node: (offset_s, bound_s)} for nodes other than 0.
        links: per rank, ``p2p_Bps`` from it to its peer (or None), or
            ``(dst, p2p_Bps)``; a bare number means the next rank's ring.

    Returns:
        The dict written by ``--json``.
    """
    ranks = sorted(rows, key=lambda r: r["rank"])
    world = len(ranks)
    slow = outliers(
        {r["rank"]: r["matmul_flops"] for r in ranks}, higher_is_worse=False
    )
    nodes = {}
    for r in ranks:
        if r["allreduce_busbw_Bps"]:
            nodes.setdefault(r["node"], r["allreduce_busbw_Bps"])
    link_rows = []
    for i, link in enumerate(links):
        dst, bw = link if isinstance(link, (tuple, list)) else ((i + 1) % world, link)
        if bw:
            cross = ranks[i]["node"] != ranks[dst]["node"]
            rail = ranks[i].get("local_rank") if cross else None
            link_rows.append({"src": i, "dst": dst, "rail": rail, "p2p_Bps": bw})
    dst_of = {x["src"]: x["dst"] for x in link_rows}
    offsets = {"0": 0.0, **{str(n): o for n, (o, _) in clock.items()}}
    bounds = {"0": 0.0, **{str(n): b for n, (_, b) in clock.items()}}
    return {
        "ranks": [{**r, "slow": r["rank"] in slow} for r in ranks],
        "slow_ranks": slow,
        "nodes": [{"node": n, "allreduce_busbw_Bps": bw} for n, bw in nodes.items()],
        "slow_nodes": outliers(nodes, higher_is_worse=False),
        "links": link_rows,
        "slow_links": [
            f"{i}->{dst_of[i]}"
            for i in outliers(
                {x["src"]: x["p2p_Bps"] for x in link_rows}, higher_is_worse=False
            )
        ],
        "clock_offsets_s": offsets,
        "clock_error_bounds_s": bounds,
        "rule": RULE,
    }


def table(rep: dict) -> str:
    """The text rank 0 prints: ranks, nodes, links (with their rail), clocks."""
    lines = [f"preflight of {len(rep['ranks'])} ranks; {rep['rule']}"]
    lines.append(f"{'rank':>4} {'node':>4} {'host':<16} {'matmul GFLOP/s':>15}  flag")
    for r in rep["ranks"]:
        flag = "SLOW" if r["slow"] else ""
        dtype = f" ({r['matmul_dtype']})" if r.get("matmul_dtype") else ""
        lines.append(
            f"{r['rank']:>4} {r['node']:>4} {r['host'][:16]:<16} "
            f"{r['matmul_flops'] / 1e9:>15.2f}  {flag}{dtype}"
        )
    for n in rep["nodes"]:
        flag = "SLOW" if n["node"] in rep["slow_nodes"] else ""
        lines.append(
            f"node {n['node']}: all-reduce bus bandwidth "
            f"{n['allreduce_busbw_Bps'] / 1e9:.3f} GB/s {flag}"
        )
    for x in rep["links"]:
        flag = "SLOW" if f"{x['src']}->{x['dst']}" in rep["slow_links"] else ""
        rail = f" (rail {x['rail']})" if x.get("rail") is not None else ""
        lines.append(
            f"link {x['src']}->{x['dst']}{rail}: {x['p2p_Bps'] / 1e9:.3f} GB/s {flag}"
        )
    for node, off in rep["clock_offsets_s"].items():
        bound = rep["clock_error_bounds_s"][node]
        lines.append(
            f"node {node}: clock offset {off * 1e3:+.3f} ms ± {bound * 1e3:.3f} ms"
        )
    return "\n".join(lines)


__all__ = [
    "RULE",
    "SKEW_ENV",
    "clock_skews",
    "ntp_offset",
    "rail_peers",
    "report",
    "table",
]
