"""Faults of an emulated cluster written as nftables rules inside the nodes.

Each node that takes part in a fault gets a table ``inet clusterlab`` in its
own namespace (so it can never match the host's traffic), with an input and an
output chain. A partition drops what a node sends to the other side (one way)
or also what it receives from it (both ways); random loss drops a share of the
packets crossing ``eth0`` (``numgen random``). The rules go to ``nft -j -f -``
as JSON built here, run inside the node with ``ip netns exec``; healing deletes
the table. ``tc netem`` is not needed (and not in every kernel).
"""

from __future__ import annotations

import json
import subprocess

TABLE = "clusterlab"


def _nft(netns: str, commands: list[dict], timeout_s: float = 10.0) -> None:
    payload = json.dumps({"nftables": commands})
    proc = subprocess.run(
        ["ip", "netns", "exec", netns, "nft", "-j", "-f", "-"],
        input=payload,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"nft in {netns} failed: {proc.stderr.strip()}")


def _table_commands() -> list[dict]:
    table = {"family": "inet", "name": TABLE}
    out = [{"add": {"table": table}}]
    for chain in ("input", "output"):
        out.append(
            {
                "add": {
                    "chain": {
                        "family": "inet",
                        "table": TABLE,
                        "name": chain,
                        "type": "filter",
                        "hook": chain,
                        "prio": 0,
                        "policy": "accept",
                    }
                }
            }
        )
    return out


def _rule(chain: str, expr: list[dict]) -> dict:
    return {"add": {"rule": {"family": "inet", "table": TABLE, "chain": chain,
                             "expr": expr}}}  # fmt: skip


def _addr_match(field: str, addresses: list[str]) -> dict:
    right = {"set": list(addresses)} if len(addresses) > 1 else addresses[0]
    return {
        "match": {
            "op": "==",
            "left": {"payload": {"protocol": "ip", "field": field}},
            "right": right,
        }
    }


def drop_to(netns: str, addresses: list[str]) -> None:
    """Drop everything this node sends to ``addresses``."""
    cmds = _table_commands()
    cmds.append(_rule("output", [_addr_match("daddr", addresses), {"drop": None}]))
    _nft(netns, cmds)


def drop_from(netns: str, addresses: list[str]) -> None:
    """Drop everything this node receives from ``addresses``."""
    cmds = _table_commands()
    cmds.append(_rule("input", [_addr_match("saddr", addresses), {"drop": None}]))
    _nft(netns, cmds)


def random_loss(netns: str, percent: float) -> None:
    """Drop ``percent`` of the packets this node sends or receives on eth0."""
    per_10k = round(percent * 100)
    cmds = _table_commands()
    for chain, key in (("input", "iifname"), ("output", "oifname")):
        cmds.append(
            _rule(
                chain,
                [
                    {
                        "match": {
                            "op": "==",
                            "left": {"meta": {"key": key}},
                            "right": "eth0",
                        }
                    },  # fmt: skip
                    {
                        "match": {
                            "op": "<",
                            "left": {"numgen": {"mode": "random", "mod": 10000}},
                            "right": per_10k,
                        }
                    },
                    {"drop": None},
                ],
            )
        )
    _nft(netns, cmds)


def heal(netns: str) -> None:
    """Delete this node's fault table, if it has one."""
    cmds = [{"add": {"table": {"family": "inet", "name": TABLE}}}]
    cmds.append({"delete": {"table": {"family": "inet", "name": TABLE}}})
    _nft(netns, cmds)


def tables(netns: str) -> list[str]:
    """The nftables tables inside a node, as ``family name``."""
    proc = subprocess.run(
        ["ip", "netns", "exec", netns, "nft", "-j", "list", "tables"],
        capture_output=True,
        text=True,
        timeout=10.0,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"nft in {netns} failed: {proc.stderr.strip()}")
    items = json.loads(proc.stdout or '{"nftables": []}')["nftables"]
    return [
        f"{t['table']['family']} {t['table']['name']}" for t in items if "table" in t
    ]
