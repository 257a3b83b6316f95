"""All-reduce step by step: a ring, a tree, and NVLS (the switch adds).

Rank ``r`` starts with its own vector, named by a letter (GPU 0 holds ``a``,
GPU 1 ``b``, ...). A box shows which ranks' contributions it holds, so
``a+b`` is a partial sum and ``a+b+c+d`` the answer. Each ``*_spec`` returns
the ``(nodes, links)`` of every step (rows carry ``t0``/``t1``) and the number
of steps; each ``*_diagram`` draws it with a slider that steps it in the page.

The ring follows the same indices as the book's ``ring_allreduce``: in step
``k`` of the reduce-scatter rank ``r`` sends chunk ``(r - k) mod n`` to rank
``r + 1``, which adds it to its own; after ``n - 1`` steps rank ``r`` holds
the whole sum of chunk ``(r + 1) mod n``, and ``n - 1`` steps of all-gather
pass the finished chunks round.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from clusterlab.core import published
from clusterlab.core.diagram import box_diagram, frame, rate_label
from clusterlab.core.validate import check_int

LETTERS = "abcdefgh"


def _sum_label(held) -> str:
    return "+".join(LETTERS[i] for i in sorted(held))


def _kind(held, n) -> str:
    return (
        "whole sum" if len(held) == n else ("partial sum" if len(held) > 1 else "own")
    )


def ring_chunks(n: int) -> list[list[list[set]]]:
    """Contributions each rank holds in each chunk, after each step of the ring.

    Returns:
        ``states[s][rank][chunk]``: the set of ranks whose data is summed in
        that chunk after step ``s`` (``s = 0`` is the start; ``2(n - 1)`` steps).
    """
    n = check_int("n", n, 2, 8)
    state = [[{r} for _ in range(n)] for r in range(n)]
    states = [[[set(c) for c in row] for row in state]]
    for k in range(2 * (n - 1)):
        sends = ring_sends(n, k + 1)
        new = [[set(c) for c in row] for row in state]
        for r, c in sends:
            dst = (r + 1) % n
            new[dst][c] = new[dst][c] | state[r][c] if k < n - 1 else set(state[r][c])
        state = new
        states.append([[set(c) for c in row] for row in state])
    return states


def ring_sends(n: int, step: int) -> list[tuple[int, int]]:
    """``(sender, chunk)`` pairs of step ``step`` (1-based) of the ring."""
    k = step - 1
    if k < n - 1:
        return [(r, (r - k) % n) for r in range(n)]
    return [(r, (r + 1 - (k - n + 1)) % n) for r in range(n)]


def ring_allreduce_spec(n: int = 4) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """Boxes (rank x chunk, at each step) and the sends of each step.

    Returns:
        ``(nodes, links, n_steps)`` with ``n_steps = 2(n - 1) + 1`` states.
    """
    states = ring_chunks(n)
    nodes, links = [], []
    bw, bh, gx, gy, x0 = 16, 7, 8, 3, 20
    for r in range(n):
        nodes.append(
            dict(
                id=f"head{r}",
                x=r * (bw + gx) + x0,
                y=0,
                w=bw,
                h=5,
                kind="label",
                label=f"GPU {r}",
            )
        )
    for c in range(n):
        nodes.append(
            dict(
                id=f"row{c}",
                x=0,
                y=8 + c * (bh + gy),
                w=5,
                h=bh,
                kind="label",
                label=f"c{c}",
            )
        )
    for s, state in enumerate(states):
        for r in range(n):
            for c in range(n):
                held = state[r][c]
                nodes.append(
                    dict(
                        id=f"s{s}r{r}c{c}",
                        x=r * (bw + gx) + x0,
                        y=8 + c * (bh + gy),
                        w=bw,
                        h=bh,
                        t0=s,
                        t1=s + 1,
                        kind=_kind(held, n),
                        label=_sum_label(held),
                    )
                )
        if s == 0:
            continue
        phase = "reduce-scatter: add" if s <= n - 1 else "all-gather: copy"
        for r, c in ring_sends(n, s):
            dst = (r + 1) % n
            pairs = [(f"s{s}r{r}c{c}", f"s{s}r{dst}c{c}")]
            if dst == 0:  # the wrap-around send leaves right and enters left
                y = 8 + c * (bh + gy)
                right = n * (bw + gx) + x0 - gx + 2
                nodes.append(
                    dict(
                        id=f"s{s}out",
                        x=right,
                        y=y,
                        w=12,
                        h=bh,
                        t0=s,
                        t1=s + 1,
                        kind="label",
                        label="to GPU 0",
                    )
                )
                nodes.append(
                    dict(
                        id=f"s{s}in",
                        x=6,
                        y=y,
                        w=12,
                        h=bh,
                        t0=s,
                        t1=s + 1,
                        kind="label",
                        label=f"from GPU {r}",
                    )
                )
                pairs = [(pairs[0][0], f"s{s}out"), (f"s{s}in", pairs[0][1])]
            for src, dst_id in pairs:
                links.append(
                    dict(src=src, dst=dst_id, t0=s, t1=s + 1, kind=phase, label="")
                )
    return frame(nodes, ()), frame(links, ()), len(states)


def ring_allreduce_diagram(n: int = 4) -> alt.LayerChart:
    """The ring all-reduce, one slider step per send-and-receive round."""
    nodes, links, n_steps = ring_allreduce_spec(n)
    return box_diagram(
        nodes,
        links,
        title=f"Ring all-reduce on {n} GPUs: reduce-scatter, then all-gather",
        subtitle=[
            f"steps 1-{n - 1}: each GPU sends one chunk right and adds what it gets;",
            f"steps {n}-{2 * (n - 1)}: the whole sums go round "
            f"(GPU {n - 1} sends to GPU 0)",
        ],
        size=(560, 230),
        n_steps=n_steps,
        legend=True,
    )


# A binomial tree on four ranks: (child, parent) pairs of each reduce step.
_TREE_UP = [[(1, 0), (3, 2)], [(2, 0)]]


_TREE_POS = {0: (40, 0), 1: (8, 24), 2: (72, 24), 3: (72, 48)}


def tree_allreduce_spec() -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """A reduce up a binomial tree of four ranks, then a broadcast down.

    Returns:
        ``(nodes, links, n_steps)``: 2 reduce and 2 broadcast steps (5 states).
    """
    n = len(_TREE_POS)
    held = {r: {r} for r in range(n)}
    steps = [(pairs, "reduce: add") for pairs in _TREE_UP]
    steps += [
        ([(p, c) for c, p in pairs], "broadcast: copy") for pairs in _TREE_UP[::-1]
    ]
    nodes, links = [], []

    def draw(s):
        for r, (x, y) in _TREE_POS.items():
            nodes.append(
                dict(
                    id=f"s{s}r{r}",
                    x=x,
                    y=y,
                    w=20,
                    h=8,
                    t0=s,
                    t1=s + 1,
                    kind=_kind(held[r], n),
                    label=f"GPU {r}: {_sum_label(held[r])}",
                )
            )

    draw(0)
    for s, (pairs, phase) in enumerate(steps, start=1):
        if phase.startswith("reduce"):
            for src, dst in pairs:
                held[dst] = held[dst] | held[src]
        else:
            for src, dst in pairs:
                held[dst] = set(held[src])
        draw(s)
        for src, dst in pairs:
            links.append(
                dict(
                    src=f"s{s}r{src}",
                    dst=f"s{s}r{dst}",
                    t0=s,
                    t1=s + 1,
                    kind=phase,
                    label=phase,
                )
            )
    return frame(nodes, ()), frame(links, ()), len(steps) + 1


def tree_allreduce_diagram() -> alt.LayerChart:
    """The tree all-reduce of :func:`tree_allreduce_spec`, stepped by a slider."""
    nodes, links, n_steps = tree_allreduce_spec()
    return box_diagram(
        nodes,
        links,
        title="Tree all-reduce on 4 GPUs: reduce up, broadcast down",
        subtitle="2 log2(4) = 4 steps of latency, each moving the whole vector "
        "(NCCL cuts it into chunks and pipelines them)",
        size=(460, 220),
        n_steps=n_steps,
        legend=True,
    )


def nvls_allreduce_spec(
    n: int = 4, part: str = "H200 SXM"
) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """Each GPU sends its vector into the NVSwitch, which adds and multicasts.

    Args:
        n: GPUs, in [2, 8].
        part: a ``gpu_specs`` part whose NVLink rate labels the links.

    Returns:
        ``(nodes, links, n_steps)``: start, send up, multicast down.
    """
    n = check_int("n", n, 2, 8)
    nv = rate_label(published.value("gpu_specs", "nvlink_per_direction_Bps", part=part))
    everyone = set(range(n))
    nodes, links = [], []
    switch = {
        0: "NVSwitch: idle",
        1: f"NVSwitch adds: {_sum_label(everyone)}",
        2: f"NVSwitch multicasts {_sum_label(everyone)}",
    }
    for s in range(3):
        nodes.append(
            dict(
                id=f"s{s}sw",
                x=4,
                y=0,
                w=22 * n - 4,
                h=8,
                t0=s,
                t1=s + 1,
                kind="NVSwitch",
                label=switch[s],
            )
        )
        for r in range(n):
            held = everyone if s == 2 else {r}
            nodes.append(
                dict(
                    id=f"s{s}g{r}",
                    x=4 + 22 * r,
                    y=30,
                    w=18,
                    h=8,
                    t0=s,
                    t1=s + 1,
                    kind=_kind(held, n),
                    label=f"GPU {r}: {_sum_label(held)}",
                )
            )
            if s == 1:
                links.append(
                    dict(
                        src=f"s1g{r}",
                        dst="s1sw",
                        t0=1,
                        t1=2,
                        kind="up",
                        label=f"{nv}" if r == 0 else "",
                    )
                )
            if s == 2:
                links.append(
                    dict(
                        src="s2sw",
                        dst=f"s2g{r}",
                        t0=2,
                        t1=3,
                        kind="down",
                        label=f"{nv}" if r == 0 else "",
                    )
                )
    return frame(nodes, ()), frame(links, ()), 3


def nvls_allreduce_diagram(n: int = 4, part: str = "H200 SXM") -> alt.LayerChart:
    """NVLS (NVLink SHARP) all-reduce: one send up and one receive per GPU."""
    nodes, links, n_steps = nvls_allreduce_spec(n, part)
    return box_diagram(
        nodes,
        links,
        title=f"NVLS all-reduce on {n} GPUs: the switch does the adding",
        subtitle="each GPU sends its vector once and receives the sum once, "
        "instead of 2(n-1)/n of it each way in a ring",
        size=(460, 160),
        n_steps=n_steps,
        legend=True,
    )


__all__ = [
    "nvls_allreduce_diagram",
    "nvls_allreduce_spec",
    "ring_allreduce_diagram",
    "ring_allreduce_spec",
    "ring_chunks",
    "tree_allreduce_diagram",
    "tree_allreduce_spec",
]
