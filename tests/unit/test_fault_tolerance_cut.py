"""The link-cut check, the listeners' rule with nodes, and the cut's fallback."""

import pandas as pd
import pytest

from clusterlab.fault_tolerance import check, partition

GOOD = dict(timeout_s=2.0, heartbeat_s=1.0, cut_s=3.1, stall_s=2.14, back_s=0.16,
            restarts=0, healed_from="group 0", steps=100)  # fmt: skip


def _table(**change):
    return pd.DataFrame([{**GOOD, **change}])


def test_a_cut_found_by_the_collective_timeout_and_healed_in_place_passes():
    assert check.cut_waits_for_the_timeout(_table())


def test_a_cut_between_collectives_costs_a_heartbeat_and_passes_too():
    # the cut fell between collectives: the next quorum left the group out
    assert check.cut_waits_for_the_timeout(_table(stall_s=1.06))


def test_a_cut_noticed_at_once_or_waited_out_fails():
    with pytest.raises(AssertionError, match="cannot be noticed at once"):
        check.cut_waits_for_the_timeout(_table(stall_s=0.2))
    # the survivors waited for the link to come back: nothing left the group out
    with pytest.raises(AssertionError, match="not waited for"):
        check.cut_waits_for_the_timeout(_table(stall_s=3.1, cut_s=3.1))
    with pytest.raises(AssertionError, match="past"):
        check.cut_waits_for_the_timeout(_table(stall_s=3.5, cut_s=8.0))


def test_a_group_restarted_or_rejoined_without_healing_fails():
    with pytest.raises(AssertionError, match="restarted"):
        check.cut_waits_for_the_timeout(_table(restarts=1))
    with pytest.raises(AssertionError, match="without healing"):
        check.cut_waits_for_the_timeout(_table(healed_from=None))
    with pytest.raises(AssertionError, match="trained again"):
        check.cut_waits_for_the_timeout(_table(back_s=9.0))


def test_the_cut_check_names_bad_input():
    with pytest.raises(ValueError, match="lacks the column"):
        check.cut_waits_for_the_timeout(_table().drop(columns="stall_s"))
    with pytest.raises(ValueError, match="no row"):
        check.cut_waits_for_the_timeout(_table().iloc[:0])


def test_a_node_address_is_allowed_only_when_named():
    nodes = ["10.213.0.1", "10.213.0.2"]
    seen = {"lighthouse": ["10.213.0.1:29510"], "replica1": ["127.0.0.1:4000"]}
    assert check.loopback_only(seen, nodes=nodes)
    with pytest.raises(AssertionError, match="beyond loopback"):
        check.loopback_only(seen)
    with pytest.raises(AssertionError, match="emulated nodes"):
        check.loopback_only({"a": ["0.0.0.0:29510"]}, nodes=nodes)


def test_the_cut_run_refuses_bad_arguments():
    with pytest.raises(ValueError, match="n_groups"):
        partition.cut_and_heal(n_groups=2)
    with pytest.raises(ValueError, match="cut"):
        partition.cut_and_heal(cut=0)
    with pytest.raises(ValueError, match="timeout_s"):
        partition.cut_and_heal(timeout_s=0.1)


def test_where_nodes_cannot_be_emulated_the_recorded_cuts_are_shown(monkeypatch):
    import clusterlab.cluster.support as support

    monkeypatch.setattr(support, "why_not", lambda: "This machine is not root.")
    table, note, run = partition.measure_or_recorded()
    assert run is None and list(table.columns) == partition.COLUMNS
    assert note.startswith("This machine is not root. Shown instead")
    assert "--cut-only" in note
    assert check.cut_waits_for_the_timeout(table)  # the lab's check holds on them


def test_a_bad_host_is_refused_by_the_trainer(capsys):
    from clusterlab.fault_tolerance.train import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--lighthouse", "http://127.0.0.1:1", "--replica-id", "0",
                    "--steps", "5", "--log", "x", "--host", "node0"])  # fmt: skip
    assert "must be an IPv4 address" in capsys.readouterr().err


def test_no_listener_may_bind_every_interface():
    from clusterlab.fault_tolerance import loopback

    assert loopback.check_host("10.213.0.3") == "10.213.0.3"
    with pytest.raises(ValueError, match="every interface"):
        loopback.check_host("0.0.0.0")
    with pytest.raises(ValueError, match="every interface"):
        loopback.rewrite_bind("[::]:29510", host="0.0.0.0")
    with pytest.raises(ValueError, match="IPv4"):
        loopback.loopback_store(host="node0")
    with pytest.raises(ValueError, match="every interface"):
        loopback.free_port("0.0.0.0")
    assert loopback.free_port() > 0
