"""The emulated cluster's parts that need no root: shapes, names, the fallback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from clusterlab.cluster import names
from clusterlab.cluster.support import FORCE_FALLBACK, why_not
from clusterlab.cluster.topology import Topology


def test_a_two_tier_topology_has_leaves_a_spine_and_oversubscribed_uplinks():
    t = Topology(nodes=4, rate_mbit=100, kind="two_tier", leaves=2, uplink_mbit=50)
    assert t.switches == ["leaf0", "leaf1", "spine"]
    assert [(lk.a, lk.b) for lk in t.links][-2:] == [("leaf0", "spine"),
                                                     ("leaf1", "spine")]  # fmt: skip
    assert t.leaf_of(3) == "leaf1"
    assert t.oversubscription == 4.0
    assert (
        Topology(nodes=4, rate_mbit=100, kind="two_tier", leaves=2).oversubscription
        == 1.0
    )


@pytest.mark.parametrize(
    "kwargs, word",
    [
        ({"nodes": 0, "rate_mbit": 100}, "nodes=0"),
        ({"nodes": 2, "rate_mbit": -1}, "rate_mbit=-1"),
        ({"nodes": 2, "rate_mbit": 100, "kind": "ring"}, "kind='ring'"),
        ({"nodes": 3, "rate_mbit": 100, "kind": "two_tier", "leaves": 2}, "leaves=2"),
        ({"nodes": 2, "rate_mbit": 100, "leaves": 2}, "leaves=2"),
    ],
)
def test_bad_shapes_are_refused_with_the_argument_named(kwargs, word):
    with pytest.raises(ValueError, match=word):
        Topology(**kwargs)


def test_names_are_recognised_only_with_the_books_prefix_and_an_id():
    cid = names.new_id()
    assert names.id_of(names.netns_name(cid, "node0")) == cid
    for other in ("clusterlab-node0", "clusterlabx-12345678-a", "ns1", "clusterlab-zz"):
        assert names.id_of(other) is None, other


def test_forcing_the_fallback_says_why_in_one_sentence_and_exits_2(monkeypatch):
    monkeypatch.setenv(FORCE_FALLBACK, "1")
    assert why_not().endswith(".")
    cmd = [sys.executable, "-m", "clusterlab.cluster", "allreduce", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert (
        out.stdout == ""
        and out.stderr.count(".") == 1
        and "Traceback" not in out.stderr
    )


def test_the_diagram_draws_every_link_the_build_makes_at_its_rate():
    from clusterlab.cluster.diagram import frames, topology_diagram

    t = Topology(nodes=4, rate_mbit=100, kind="two_tier", leaves=2, uplink_mbit=50)
    boxes, links = frames(t)
    assert set(boxes["id"]) == set(t.node_names) | set(t.switches)
    drawn = {(r.src, r.dst, r.label) for r in links.itertuples()}
    assert drawn == {(lk.b, lk.a, f"{lk.rate_mbit:g} Mbit/s") for lk in t.links}
    assert "10.213.0.4" in " ".join(boxes["label"])
    assert topology_diagram(t).to_dict()["title"]["subtitle"] == t.describe()


@pytest.mark.parametrize(
    "flag, value, word",
    [("--nodes", "0", "nodes=0"), ("--rate-mbit", "-5", "rate_mbit=-5"),
     ("--size-mib", "0", "size_mib=0"), ("--ranks-per-node", "9", "ranks_per_node=9")],
)  # fmt: skip
def test_the_command_names_a_bad_argument_and_its_range(flag, value, word):
    cmd = [sys.executable, "-m", "clusterlab.cluster", "allreduce", flag, value]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and word in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
