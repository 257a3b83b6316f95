"""The emulated cluster drawn from the ``Topology`` that builds it.

``frames(topology)`` turns the same switches, nodes and links that
``build.build`` makes into the two tables of ``core.diagram.box_diagram``;
``topology_diagram`` draws them, so the picture cannot drift from the network.
"""

from __future__ import annotations

import pandas as pd

from clusterlab.cluster.topology import Topology
from clusterlab.core.diagram import box_diagram

W, H, GAP = 110.0, 34.0, 30.0


def frames(topology: Topology) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(nodes, links) tables of the cluster: switches above, nodes below."""
    n = topology.nodes
    width = n * (W + GAP)

    def row(names, y, kind, labels):
        step = width / len(names)
        return [
            {
                "id": name,
                "x": i * step + (step - W) / 2,
                "y": y,
                "w": W,
                "h": H,
                "label": label,
                "kind": kind,
            }  # fmt: skip
            for i, (name, label) in enumerate(zip(names, labels, strict=True))
        ]

    boxes = []
    y = 0.0
    if topology.kind == "two_tier":
        boxes += row(["spine"], y, "switch", ["spine switch"])
        y += H + 3 * GAP
        leaves = [f"leaf{j}" for j in range(topology.leaves)]
        boxes += row(leaves, y, "switch", [f"{name} switch" for name in leaves])
    else:
        boxes += row(["switch"], y, "switch", ["switch (bridge)"])
    y += H + 3 * GAP
    labels = [f"{name} {addr}" for name, addr in
              zip(topology.node_names, topology.addresses, strict=True)]  # fmt: skip
    boxes += row(topology.node_names, y, "node", labels)
    links = [
        {
            "src": lk.b,
            "dst": lk.a,
            "label": f"{lk.rate_mbit:g} Mbit/s",
            "kind": "link",
            "arrow": False,
        }  # fmt: skip
        for lk in topology.links
    ]
    return pd.DataFrame(boxes), pd.DataFrame(links)


def topology_diagram(topology: Topology, title: str | None = None):
    """The cluster's switches, nodes, addresses and link rates as a chart."""
    nodes, links = frames(topology)
    return box_diagram(
        nodes,
        links,
        title=title or "An emulated cluster",
        subtitle=topology.describe(),
        size=(max(360, 150 * topology.nodes), 230),
    )
