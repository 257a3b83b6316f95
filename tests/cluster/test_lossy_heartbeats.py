"""A heartbeat detector across a lossy link between two emulated nodes: its false
suspicions against the closed form, and nothing left behind."""

from __future__ import annotations

import pytest

from clusterlab.cluster import names
from clusterlab.cluster.support import why_not

REASON = why_not()
pytestmark = [
    pytest.mark.dist,
    pytest.mark.skipif(REASON is not None, reason=f"no emulated nodes: {REASON}"),
]


def test_false_suspicions_across_a_lossy_link_match_the_closed_form():
    from clusterlab.core.busy import retry
    from clusterlab.failures import check, lossy

    before = set(names.book_namespaces())

    def judge(table):
        try:
            check.false_alarms_match(table)
        except AssertionError as exc:
            return "miss", str(exc)
        return "pass", "in range"

    outcome = retry(
        lambda: lossy.model_table(lossy.measure_or_recorded()[0]),
        judge,
        what="heartbeats across a lossy link",
        hint="a wrong model misses every try",
        tries=2,
    )
    table = outcome.result
    assert check.false_alarms_match(table)
    loss = table["measured_loss"].iloc[0]
    assert 0.25 < loss < 0.35, loss  # the link's 30%, give or take the draw
    assert set(names.book_namespaces()) <= before  # nothing of ours is left
