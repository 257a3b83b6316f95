"""The example as a picture: workers sending their values to one sum."""

from __future__ import annotations

from clusterlab.core.diagram import box_diagram, frame
from clusterlab.core.validate import check_int


def sum_diagram(n_workers: int = 4):
    """Boxes for the workers and the sum, an arrow from each worker."""
    n = check_int("n_workers", n_workers, 1, 16)
    nodes = [
        dict(
            id=f"w{i}", x=i * 100 / n, y=0, w=80 / n, h=10, kind="worker", label=f"w{i}"
        )
        for i in range(n)
    ]
    nodes.append(dict(id="sum", x=40, y=30, w=20, h=10, kind="sum", label="sum"))
    links = [dict(src=f"w{i}", dst="sum", kind="value", label="") for i in range(n)]
    return box_diagram(
        frame(nodes, ("kind", "label")),
        frame(links, ("kind", "label")),
        title="Every worker sends its value to the sum",
    )
