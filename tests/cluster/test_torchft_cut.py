"""A torchft group's link cut across emulated nodes: the survivors wait for the
collective's timeout, the cut-off group heals in place, nothing is left behind."""

from __future__ import annotations

import pytest

from clusterlab.cluster import names
from clusterlab.cluster.support import why_not
from clusterlab.fault_tolerance.measure import torchft_missing

REASON = why_not() or torchft_missing()
pytestmark = [
    pytest.mark.dist,
    pytest.mark.skipif(REASON is not None, reason=f"cannot run the cut: {REASON}"),
]


def test_a_cut_group_is_waited_for_then_heals_from_a_peer_in_place():
    from clusterlab.fault_tolerance import check, partition

    before = set(names.book_namespaces())
    table, note, run = partition.measure_or_recorded()
    assert run is not None and note.startswith("Measured now"), note
    assert check.cut_waits_for_the_timeout(table)
    assert check.every_step_committed(run.log, run.steps)
    assert check.params_agree(run.log)
    assert check.exactly_once(run.log)
    # every listener on the node's own address or loopback, and some on the nodes
    assert check.loopback_only(run.listeners, nodes=run.node_addresses)
    assert any(a.startswith(run.node_addresses[0]) for a in run.listeners["lighthouse"])
    assert all(code == 0 for code in run.exit_codes.values()), run.exit_codes
    new = set(names.book_namespaces()) - before
    assert [n for n in new if not names.owner_alive(names.id_of(n))] == []
