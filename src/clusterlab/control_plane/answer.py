"""Reference solution: the index a Raft leader may commit up to."""

from __future__ import annotations


def commit_index(match_index: list[int]) -> int:
    """The highest log index that a majority of the replicas store.

    ``match_index`` holds, for every replica (the leader included), the highest
    index it has stored. Sorted from high to low, the value at position
    ``n // 2`` is stored by that replica and every one before it:
    ``n // 2 + 1`` replicas, a majority. (Raft also asks that the entry there
    be of the leader's own term before it counts it as committed.)
    """
    return sorted(match_index, reverse=True)[len(match_index) // 2]


__all__ = ["commit_index"]
