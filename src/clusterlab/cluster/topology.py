"""The shape of an emulated cluster: nodes, switches and the links between them.

A :class:`Topology` is the one description that both builds a cluster
(``cl.cluster.emulated``) and draws it (``cl.cluster.diagram``), so the picture
on the page is the network the ranks ran on. Two shapes:

* ``flat``: every node on one switch, each by a link of ``rate_mbit``;
* ``two_tier``: nodes split evenly under ``leaves`` leaf switches, each leaf
  joined to one spine switch by an uplink of ``uplink_mbit``. An uplink slower
  than the sum of its nodes' links is oversubscribed (``oversubscription``).
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterlab.core.validate import check_choice, check_float, check_int

MAX_NODES = 8
MAX_RATE_MBIT = 10_000.0
SUBNET = "10.213.0"


@dataclass(frozen=True)
class Link:
    """One shaped link: its two ends (node or switch names) and its rate."""

    a: str
    b: str
    rate_mbit: float
    name: str


@dataclass(frozen=True)
class Topology:
    """N nodes on shaped links, flat or in two tiers.

    Args:
        nodes: number of nodes, in [1, 8].
        rate_mbit: each node's link, Mbit/s, in (0, 10000].
        kind: ``"flat"`` or ``"two_tier"``.
        leaves: leaf switches of a two-tier network (nodes divide evenly), [1, 8].
        uplink_mbit: each leaf's uplink to the spine, Mbit/s; None: the sum of
            its nodes' links (not oversubscribed).
    """

    nodes: int
    rate_mbit: float
    kind: str = "flat"
    leaves: int = 1
    uplink_mbit: float | None = None

    def __post_init__(self):
        check_int("nodes", self.nodes, 1, MAX_NODES)
        check_float(
            "rate_mbit", self.rate_mbit, 0.0, MAX_RATE_MBIT, low_inclusive=False
        )
        check_choice("kind", self.kind, ("flat", "two_tier"))
        check_int("leaves", self.leaves, 1, MAX_NODES)
        if self.kind == "flat" and self.leaves != 1:
            raise ValueError(f"leaves={self.leaves!r} must be 1 for kind='flat'")
        if self.nodes % self.leaves:
            raise ValueError(
                f"leaves={self.leaves!r} must divide nodes={self.nodes!r} evenly"
            )
        if self.uplink_mbit is not None:
            if self.kind == "flat":
                raise ValueError("uplink_mbit is only for kind='two_tier'")
            check_float(
                "uplink_mbit", self.uplink_mbit, 0.0, MAX_RATE_MBIT, low_inclusive=False
            )

    @property
    def node_names(self) -> list[str]:
        """``node0``, ``node1``, ...: each is a network namespace."""
        return [f"node{i}" for i in range(self.nodes)]

    def address(self, node: int) -> str:
        """The IPv4 address of node ``node`` (inside its namespace only)."""
        check_int("node", node, 0, self.nodes - 1)
        return f"{SUBNET}.{node + 1}"

    @property
    def addresses(self) -> list[str]:
        """Every node's address, in node order."""
        return [self.address(i) for i in range(self.nodes)]

    @property
    def per_leaf(self) -> int:
        """Nodes under each leaf switch."""
        return self.nodes // self.leaves

    def leaf_of(self, node: int) -> str:
        """The switch node ``node`` hangs from."""
        if self.kind == "flat":
            return "switch"
        return f"leaf{node // self.per_leaf}"

    @property
    def switches(self) -> list[str]:
        """Every switch (a Linux bridge in the fabric's namespace)."""
        if self.kind == "flat":
            return ["switch"]
        return [f"leaf{j}" for j in range(self.leaves)] + ["spine"]

    @property
    def uplink_rate_mbit(self) -> float | None:
        """Each leaf's uplink rate (None for a flat network)."""
        if self.kind == "flat":
            return None
        return self.uplink_mbit or self.rate_mbit * self.per_leaf

    @property
    def oversubscription(self) -> float:
        """Nodes' link rate under a leaf over its uplink rate (1.0 if flat)."""
        if self.kind == "flat":
            return 1.0
        return self.rate_mbit * self.per_leaf / self.uplink_rate_mbit

    @property
    def links(self) -> list[Link]:
        """Every shaped link; ``name`` is its interface name in the fabric."""
        out = [
            Link(f"node{i}", self.leaf_of(i), self.rate_mbit, f"n{i}")
            for i in range(self.nodes)
        ]
        if self.kind == "two_tier":
            out += [
                Link(f"leaf{j}", "spine", self.uplink_rate_mbit, f"up{j}")
                for j in range(self.leaves)
            ]
        return out

    def describe(self) -> str:
        """One line: the shape in words."""
        if self.kind == "flat":
            return f"{self.nodes} nodes on one switch, {self.rate_mbit:g} Mbit/s each"
        return (
            f"{self.nodes} nodes under {self.leaves} leaves at {self.rate_mbit:g} "
            f"Mbit/s, uplinks {self.uplink_rate_mbit:g} Mbit/s "
            f"({self.oversubscription:g}:1)"
        )
