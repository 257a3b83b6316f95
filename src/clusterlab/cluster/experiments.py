"""The network labs' experiments across emulated nodes, at SMOKE and FULL size.

Each is the keyword arguments of ``recorded.measure``; the rates are low enough
(tens to hundreds of Mbit/s) that on two shared cores the link, not the CPU,
sets the time. ``RECORDED`` holds the SMOKE sizes, the ones the book records.
"""

from __future__ import annotations

from clusterlab.core.env import size


def link_sizes() -> dict:
    """Bus bandwidth against link rate across sizes, 2 nodes x 1 rank."""
    return {
        "nodes": 2,
        "ranks_per_node": 1,
        "rates_mbit": size(smoke=(50, 200), full=(50, 100, 200, 400)),
        "sizes_mib": size(smoke=(0.5, 2, 8), full=(0.25, 1, 4, 16, 64)),
        "reps": 3,
    }


def hierarchy() -> dict:
    """Flat ring against hierarchical all-reduce at 2 nodes x 2 ranks, 100 Mbit/s."""
    return {
        "nodes": 2,
        "ranks_per_node": 2,
        "rates_mbit": (100,),
        "sizes_mib": (16,),
        "algorithms": ("ring", "hierarchical"),
        "reps": size(smoke=2, full=5),
    }


RECORDED = {
    "link_sizes": {**link_sizes(), "rates_mbit": (50, 200), "sizes_mib": (0.5, 2, 8)},
    "hierarchy": {**hierarchy(), "reps": 2},
}
