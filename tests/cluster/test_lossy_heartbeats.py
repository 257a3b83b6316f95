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

    runs = []

    def measured():
        run = lossy.heartbeats_over_loss(**lossy.EXPERIMENT)
        runs.append(run)
        return lossy.model_table(lossy.false_alarms(run, lossy.TIMEOUTS_MS))

    def judge(table):
        try:
            check.false_alarms_match(table)
        except AssertionError as exc:
            return "miss", str(exc)
        return "pass", "in range"

    outcome = retry(
        measured,
        judge,
        what="heartbeats across a lossy link",
        hint="a wrong model misses every try",
        tries=2,
    )
    table = outcome.result
    assert check.false_alarms_match(table)
    loss = table["measured_loss"].iloc[0]
    assert 0.22 < loss < 0.38, loss  # 30%, within 3.5 sigma of 400 draws
    ours = {r["cluster_id"] for r in runs}  # nothing of these clusters is left
    assert [n for n in names.book_namespaces() if names.id_of(n) in ours] == []
