"""Fault tolerance as a picture: a quorum per step, and a group healing.

Rows are replica groups, columns are attempts at a step. A box is what a group
did in that attempt: committed its step, trained but did not commit (a peer
died in the step), was down, or healed from a live peer and committed with the
others. The arrow shows where the healing group's state came from.
"""

from __future__ import annotations

from clusterlab.core.diagram import box_diagram, frame
from clusterlab.core.validate import check_int


def quorum_diagram(n_groups: int = 3, killed: int = 1, kill_step: int = 5):
    """A schematic of one failure: the quorum shrinks, the step is retried, a heal.

    Args:
        n_groups: replica groups, in [2, 6].
        killed: the group that dies, in [0, n_groups - 1].
        kill_step: the step in flight when it dies, in [1, 10000].
    """
    n = check_int("n_groups", n_groups, 2, 6)
    k = check_int("killed", killed, 0, n - 1)
    s = check_int("kill_step", kill_step, 1, 10_000)
    peer = 0 if k != 0 else 1
    # (column title, what each group does)
    columns = [
        (f"step {s - 1}", lambda g: ("committed", "commit")),
        (
            f"step {s}",
            lambda g: ("down", "killed") if g == k else ("lost", "no commit"),
        ),
        (
            f"step {s}, again",
            lambda g: ("down", "down") if g == k else ("committed", "commit"),
        ),
        (
            f"step {s + 1}",
            lambda g: ("down", "restarting") if g == k else ("committed", "commit"),
        ),
        (
            f"step {s + 2}",
            lambda g: (
                ("healing", f"heal from {peer}") if g == k else ("committed", "commit")
            ),
        ),
        (f"step {s + 3}", lambda g: ("committed", "commit")),
    ]
    nodes, links = [], []
    for c, (head, what) in enumerate(columns):
        x = 12 + c * 15
        nodes.append(dict(id=f"h{c}", x=x, y=0, w=14, h=6, kind="label", label=head))
        quorum = (n, n, n - 1, n - 1, n, n)[c]
        nodes.append(
            dict(id=f"q{c}", x=x, y=8 + 10 * n, w=14, h=6, kind="label",
                 label=f"quorum {quorum}")
        )  # fmt: skip
        for g in range(n):
            kind, label = what(g)
            nodes.append(
                dict(
                    id=f"g{g}c{c}", x=x, y=8 + 10 * g, w=14, h=8, kind=kind, label=label
                )
            )
    for g in range(n):
        nodes.append(
            dict(id=f"name{g}", x=0, y=8 + 10 * g, w=10, h=8, kind="label",
                 label=f"group {g}")
        )  # fmt: skip
    links.append(dict(src=f"g{peer}c4", dst=f"g{k}c4", kind="state", label="state"))
    return box_diagram(
        frame(nodes, ("kind", "label")),
        frame(links, ("kind", "label")),
        title="A quorum per step: a group dies, the step is retried, the group heals",
        subtitle="the in-flight step is not committed; the survivors retry it with a "
        "smaller quorum; the restarted group receives a live peer's state",
        size=(650, 60 + 40 * n),
        legend=True,
    )


__all__ = ["quorum_diagram"]
