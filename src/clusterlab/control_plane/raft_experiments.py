"""Three experiments on a real Raft cluster: leader kills, a cut, write latency.

``leader_kills`` kills the leader again and again (restarting the killed
replica from its journal each time) and records how long the others took to
elect a new one, and every write with whether it committed.
``minority_cut`` cuts the leader and one follower off from the rest: the old
leader cannot commit, the majority elects a leader of its own and can.
``write_latency`` times committed writes: each waits for a majority to store
the entry, the price of a strongly consistent write. Each returns plain
DataFrames; ``cl.control_plane.check`` judges them::

    from clusterlab.control_plane import raft_experiments as rx
    rounds, writes, events = rx.leader_kills(n_replicas=3, kills=3)

Every replica is stopped when a function returns or raises.
"""

from __future__ import annotations

import time

import pandas as pd

from clusterlab.control_plane.raft import RaftCluster
from clusterlab.core.validate import check_int


def _write(rc: RaftCluster, addr: str, key: str, value, rows: list, **extra) -> dict:
    ans = rc.put(addr, key, value, timeout_s=extra.pop("timeout_s", 2.0))
    rows.append(
        {
            "key": key,
            "value": value,
            "via": addr,
            "committed": bool(ans.get("ok")),
            "latency_s": ans.get("latency_s", float("nan")),
            "error": ans.get("error", ""),
            **extra,
        }
    )
    return ans


def converged_data(rc: RaftCluster, addrs, wait_s: float = 5.0) -> dict:
    """Each replica's dictionary, once all of ``addrs`` hold the same one.

    A follower applies an entry only when it learns the commit index, one
    message later than the leader, so the replicas are read until they agree
    (or ``wait_s`` passes; then their last, differing, reads are returned).

    Returns:
        ``{address: {key: value}}``.
    """
    deadline = time.monotonic() + wait_s
    while True:
        seen = {a: rc.data(a) for a in addrs}
        same = all(d == next(iter(seen.values())) for d in seen.values())
        if same or time.monotonic() > deadline:
            return seen
        time.sleep(0.05)


def _events(rc: RaftCluster) -> pd.DataFrame:
    rows = [e for e in rc.events if e.get("event") == "state"]
    return pd.DataFrame(rows, columns=["node", "state", "term", "t"])


def leader_kills(
    n_replicas: int = 3,
    kills: int = 3,
    writes_per_round: int = 3,
    *,
    min_timeout_s: float = 0.4,
    max_timeout_s: float = 0.8,
    heartbeat_s: float = 0.05,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Kill the leader ``kills`` times; write before each kill and after the last.

    Args:
        n_replicas: replicas, in [3, 9].
        kills: leader kills, in [1, 10]; the killed replica restarts from its
            journal once a new leader is elected.
        writes_per_round: committed writes wanted before each kill, in [1, 100].
        min_timeout_s, max_timeout_s, heartbeat_s: as for ``RaftCluster``.

    Returns:
        ``(rounds, writes, events)``: ``rounds`` one row per kill (``killed,
        new_leader, election_s`` from the kill to the first replica that became
        leader, ``term``, ``min_timeout_s, max_timeout_s, heartbeat_s``);
        ``writes`` one row per write (``key, value, via, committed, latency_s,
        error, round``), with ``attrs["final"]``, every replica's dictionary at
        the end; ``events`` every state change (``node, state, term, t``).
    """
    check_int("n_replicas", n_replicas, 3, 9)
    check_int("kills", kills, 1, 10)
    check_int("writes_per_round", writes_per_round, 1, 100)
    timing = dict(min_timeout_s=min_timeout_s, max_timeout_s=max_timeout_s)
    timing["heartbeat_s"] = heartbeat_s
    rounds, writes = [], []
    with RaftCluster(n_replicas, **timing) as rc:
        leader = rc.wait_for_leader()
        for k in range(kills + 1):
            for i in range(writes_per_round):
                _write(rc, leader, f"r{k}w{i}", k * 100 + i, writes, round=k)
            if k == kills:
                break
            t_kill = rc.kill(leader)
            new = rc.wait_for_leader()
            elected = [e for e in rc.events if e.get("state") == "leader"]
            first = min((e for e in elected if e["t"] > t_kill), key=lambda e: e["t"])
            old_term = max(e["term"] for e in elected if e["t"] <= t_kill)
            stood = [
                e["t"]
                for e in rc.events
                if e.get("state") == "candidate"
                and e["node"] == first["node"]
                and t_kill < e["t"] <= first["t"]
            ]
            rounds.append(
                {
                    "round": k,
                    "killed": leader,
                    "new_leader": new,
                    "election_s": first["t"] - t_kill,
                    "term": first["term"],
                    "vote_rounds": first["term"] - old_term,
                    "vote_s": first["t"] - max(stood, default=first["t"]),
                    **timing,
                }
            )
            rc.restart(leader)
            rc.wait_caught_up(leader, new)  # three of three again before the next kill
            leader = new
        final = converged_data(rc, rc.alive())
        events = _events(rc)
    table = pd.DataFrame(writes)
    table.attrs["final"] = final
    return pd.DataFrame(rounds), table, events


def minority_cut(
    n_replicas: int = 5,
    *,
    min_timeout_s: float = 0.4,
    max_timeout_s: float = 0.8,
    heartbeat_s: float = 0.05,
    write_timeout_s: float = 1.5,
) -> dict:
    """Cut the leader and ``n // 2 - 1`` followers off; write on both sides; heal.

    Args:
        n_replicas: replicas, in [3, 9]; the cut-off side is a minority.
        min_timeout_s, max_timeout_s, heartbeat_s: as for ``RaftCluster``.
        write_timeout_s: how long a write waits for its commit, in seconds.

    Returns:
        A dict: ``minority`` and ``majority`` (their addresses), ``writes`` (a
        DataFrame with a ``side`` column), ``majority_leader``, ``final`` (every
        replica's dictionary after the network healed) and ``events``.
    """
    check_int("n_replicas", n_replicas, 3, 9)
    writes: list = []
    with RaftCluster(
        n_replicas,
        min_timeout_s=min_timeout_s,
        max_timeout_s=max_timeout_s,
        heartbeat_s=heartbeat_s,
    ) as rc:
        old = rc.wait_for_leader()
        _write(rc, old, "before", 1, writes, side="both")
        others = [a for a in rc.addresses if a != old]
        minority = [old, *others[: n_replicas // 2 - 1]]
        majority = [a for a in rc.addresses if a not in minority]
        rc.partition(minority, majority)
        _write(
            rc, old, "minority", 2, writes, side="minority", timeout_s=write_timeout_s
        )
        new = rc.wait_for_leader(majority)
        _write(rc, new, "majority", 3, writes, side="majority")
        rc.heal()
        _write(rc, new, "after", 4, writes, side="both")
        final = converged_data(rc, rc.addresses)
        events = _events(rc)
    return {
        "minority": minority,
        "majority": majority,
        "majority_leader": new,
        "writes": pd.DataFrame(writes),
        "final": final,
        "events": events,
    }


def write_latency(
    n_replicas: int = 3,
    n_writes: int = 20,
    *,
    batch: bool = False,
    heartbeat_s: float = 0.05,
) -> pd.DataFrame:
    """Time ``n_writes`` committed writes, one after another, through the leader.

    Args:
        n_replicas: replicas, in [3, 9].
        n_writes: writes, in [1, 1000].
        batch: the leader sends entries only with its heartbeats (True) or at
            once (False).
        heartbeat_s: the heartbeat period, seconds.

    Returns:
        One row per write: ``n_replicas, batch, heartbeat_s, i, committed,
        latency_s``.
    """
    check_int("n_writes", n_writes, 1, 1000)
    rows: list = []
    with RaftCluster(n_replicas, heartbeat_s=heartbeat_s, batch=batch) as rc:
        leader = rc.wait_for_leader()
        for i in range(n_writes):
            _write(rc, leader, f"w{i}", i, rows, i=i)
    table = pd.DataFrame(rows)
    table.insert(0, "n_replicas", n_replicas)
    table.insert(1, "batch", batch)
    table.insert(2, "heartbeat_s", heartbeat_s)
    return table[["n_replicas", "batch", "heartbeat_s", "i", "committed", "latency_s"]]


__all__ = ["converged_data", "leader_kills", "minority_cut", "write_latency"]
