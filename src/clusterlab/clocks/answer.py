"""Reference solution: does one vector timestamp come before another?"""

from __future__ import annotations


def vector_happened_before(u, v) -> bool:
    """True if the event stamped ``u`` happened before the one stamped ``v``.

    Every entry of ``u`` is at most the matching entry of ``v`` (``u`` knows of
    nothing that ``v`` does not), and the two differ (an event does not happen
    before itself).
    """
    return all(a <= b for a, b in zip(u, v, strict=True)) and list(u) != list(v)


__all__ = ["vector_happened_before"]
