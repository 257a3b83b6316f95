"""Exercise check: the happened-before test on vector timestamps."""

from __future__ import annotations

import itertools

from clusterlab.clocks.logical import LogicalParams, causal_order, simulate_messages
from clusterlab.core.checks import not_attempted, passed

#: (u, v, does u happen before v?, the hint if an answer gets it wrong)
_CASES = [
    ((1, 0, 0), (2, 1, 1), True, "every entry of u is <= the entry of v"),
    ((2, 1, 0), (1, 0, 0), False, "here v happened before u, not the other way"),
    (
        (1, 2, 0),
        (1, 2, 0),
        False,
        "an event does not happen before itself: equal vectors are not before",
    ),
    (
        (1, 1, 0),
        (1, 2, 0),
        True,
        "u <= v in every entry and they differ; some entries may be equal, "
        "so do not require every entry to be strictly smaller",
    ),
    (
        (2, 0, 0),
        (0, 1, 3),
        False,
        "these are concurrent: u is larger in one entry, v in others. Comparing "
        "sums, or a single entry, is what a Lamport clock does; compare every entry",
    ),
    (
        (0, 1, 3),
        (2, 0, 0),
        False,
        "concurrent again, the other way round: neither vector is <= the other",
    ),
]


def _history():
    """A random exchange and its true happened-before relation."""
    events = simulate_messages(LogicalParams(n_processes=3, n_events=5), seed=7)
    history = [
        (int(r.process), r.kind, None if r.msg < 0 else int(r.msg))
        for r in events.itertuples()
    ]
    return list(events["vector"]), causal_order(history, 3)


def vector_happened_before(fn) -> bool:
    """Check the exercise on hand-picked pairs and on a random history."""
    name = "vector_happened_before"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function vector_happened_before")
    try:
        fn((1, 0), (1, 1))
    except NotImplementedError:
        return not_attempted(name)
    for u, v, want, hint in _CASES:
        got = fn(u, v)
        if not isinstance(got, bool | int) or bool(got) != want:
            raise AssertionError(
                f"{name}({u}, {v}) returned {got!r}, expected {want}: {hint}"
            )
    vectors, hb = _history()
    for i, j in itertools.permutations(range(len(vectors)), 2):
        if bool(fn(vectors[i], vectors[j])) != bool(hb[i, j]):
            raise AssertionError(
                f"{name}({vectors[i]}, {vectors[j]}) returned "
                f"{fn(vectors[i], vectors[j])!r}, but in the simulated history "
                f"event {i} {'did' if hb[i, j] else 'did not'} happen before "
                f"event {j}"
            )
    n = len(vectors)
    return passed(
        name,
        f"right on {len(_CASES)} pairs and all {n * (n - 1)} pairs of a random history",
    )


__all__ = ["vector_happened_before"]
