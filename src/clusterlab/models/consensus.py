"""What agreement costs: quorums, the time to elect a leader, a committed write.

A replicated log (Raft, Paxos) commits an entry once a majority of its ``n``
replicas has stored it; so it survives ``(n - 1) // 2`` crashes, and every
committed write waits for the fastest majority to answer: the leader's own
copy plus ``n // 2`` followers. With the followers' round trips sorted, that
is the ``n // 2``-th smallest. When the leader dies, a follower stands for
election once its election timeout (drawn uniformly from ``[min, max]``,
restarted at every heartbeat) has passed without a heartbeat.

An all-reduce needs none of this: every rank computes the same sum from the
same inputs in a fixed order, so there is nothing to agree on. It needs every
rank instead, and stops when any one is gone.
"""

from __future__ import annotations

import numpy as np

from clusterlab.core.validate import check_float, check_int


def quorum_size(n_replicas: int) -> int:
    """Replicas that must store an entry before it commits: a majority of ``n``."""
    return check_int("n_replicas", n_replicas, 1, 10_000) // 2 + 1


def tolerated_failures(n_replicas: int) -> int:
    """Crashed replicas a majority-quorum log survives: ``(n - 1) // 2``."""
    return (check_int("n_replicas", n_replicas, 1, 10_000) - 1) // 2


def commit_latency_s(
    follower_rtts_s, *, disk_s: float = 0.0, client_rtt_s: float = 0.0
) -> float:
    """Time from a client's write to its commit: the majority round trip.

    The leader sends the entry to every follower at once and commits when
    ``quorum_size(n) - 1`` of them have answered, so the write waits for the
    ``n // 2``-th fastest follower, however slow the others are.

    Args:
        follower_rtts_s: each follower's round trip from the leader, seconds
            (``n - 1`` values for ``n`` replicas; at least 2).
        disk_s: time to make the entry durable (fsync), seconds, paid in
            parallel by the leader and the followers.
        client_rtt_s: the client's round trip to the leader, seconds.

    Returns:
        Seconds.
    """
    rtts = np.sort(np.asarray(follower_rtts_s, dtype=float))
    if rtts.ndim != 1 or rtts.size < 2 or not np.all(np.isfinite(rtts)):
        raise ValueError(
            f"follower_rtts_s={follower_rtts_s!r} must be at least 2 finite seconds"
        )
    if np.any(rtts < 0):
        raise ValueError(f"follower_rtts_s={follower_rtts_s!r} must be >= 0")
    check_float("disk_s", disk_s, 0.0, 3600.0)
    check_float("client_rtt_s", client_rtt_s, 0.0, 3600.0)
    needed = quorum_size(rtts.size + 1) - 1
    return float(client_rtt_s + disk_s + rtts[needed - 1])


def expected_first_timeout_s(
    n_followers: int, min_timeout_s: float, max_timeout_s: float
) -> float:
    """Mean of the earliest of ``n_followers`` timeouts uniform on [min, max].

    The first follower to time out usually wins the election, so this is the
    usual time from the last heartbeat to a candidate: ``min + (max - min) /
    (k + 1)`` for ``k`` followers.
    """
    k = check_int("n_followers", n_followers, 1, 10_000)
    lo = check_float("min_timeout_s", min_timeout_s, 0.0, 3600.0)
    hi = check_float("max_timeout_s", max_timeout_s, lo, 3600.0)
    return lo + (hi - lo) / (k + 1)


def election_time_bounds_s(
    min_timeout_s: float, max_timeout_s: float, heartbeat_s: float, rounds: int = 2
) -> tuple[float, float]:
    """The range a new leader should appear in after the old one is killed.

    No follower can stand before its timeout: the last heartbeat came at most
    ``heartbeat_s`` before the kill, so not before ``min - heartbeat``. A vote
    can fail (two candidates split it, or the first candidate's log is behind
    and the election restriction refuses it), and each failed round costs at
    most another ``max``; ``rounds`` bounds the rounds allowed.

    Returns:
        ``(low_s, high_s)``.
    """
    lo = check_float("min_timeout_s", min_timeout_s, 0.0, 3600.0)
    hi = check_float("max_timeout_s", max_timeout_s, lo, 3600.0)
    hb = check_float("heartbeat_s", heartbeat_s, 0.0, lo)
    r = check_int("rounds", rounds, 1, 100)
    return lo - hb, r * hi


def election_window_s(
    min_timeout_s: float,
    max_timeout_s: float,
    heartbeat_s: float,
    vote_rounds: int = 1,
    tick_s: float = 0.0,
    noise_s: float = 0.0,
) -> tuple[float, float]:
    """The window a new leader appears in, given the rounds its election took.

    The last heartbeat reached the followers at most ``heartbeat_s`` before the
    kill, and each drew a timeout in ``[min, max]`` then: the first candidacy
    comes no sooner than ``min - heartbeat`` after the kill and no later than
    ``max`` (plus the ``tick_s`` at which a replica looks at its timer). Each
    failed vote (``vote_rounds`` > 1, read from the terms the election took)
    adds at most another ``max``. The vote itself is a round trip on top,
    which with a late-woken process is the measured ``noise_s``.

    Args:
        min_timeout_s, max_timeout_s: the election timeout range, seconds.
        heartbeat_s: the leader's heartbeat period, seconds, <= min.
        vote_rounds: terms the election took, in [1, 100].
        tick_s: how often a replica checks its timer, seconds, in [0, max].
        noise_s: the vote's round trip and scheduling delay, seconds, in [0, 60].

    Returns:
        ``(low_s, high_s)``.
    """
    lo = check_float("min_timeout_s", min_timeout_s, 0.0, 3600.0)
    hi = check_float("max_timeout_s", max_timeout_s, lo, 3600.0)
    hb = check_float("heartbeat_s", heartbeat_s, 0.0, lo)
    r = check_int("vote_rounds", vote_rounds, 1, 100)
    tick = check_float("tick_s", tick_s, 0.0, hi)
    noise = check_float("noise_s", noise_s, 0.0, 60.0)
    return lo - hb, r * (hi + tick) + noise


__all__ = [
    "commit_latency_s",
    "election_time_bounds_s",
    "election_window_s",
    "expected_first_timeout_s",
    "quorum_size",
    "tolerated_failures",
]
