"""Servers and clusters as pictures, every rate on them read from ``data/``.

``node_spec("sxm")`` is an HGX/DGX-class server: eight SXM GPUs, each with its
NVLink into the NVSwitch chips, PCIe switches that join GPUs, NICs and CPUs.
``node_spec("pcie")`` is a server of PCIe cards, where GPUs on different
sockets meet only through the CPUs. ``cluster_spec`` draws rails and a
two-level fat tree with its oversubscription. Each ``*_spec`` returns the
``(nodes, links)`` DataFrames the matching ``*_diagram`` draws.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from clusterlab.core import published
from clusterlab.core.diagram import box_diagram, frame, rate_label, size_label
from clusterlab.core.validate import check_choice, check_int

PCIE = "PCIe 5.0 x16"


NDR = "InfiniBand NDR (one 400 Gb/s port)"


NODE_KINDS = ("sxm", "pcie")


def _rate(link: str) -> float:
    return published.value("interconnect_rates", "per_direction_Bps", link=link)


def _gpu(part: str, column: str) -> float:
    return published.value("gpu_specs", column, part=part)


def node_spec(kind: str = "sxm", n_gpus: int = 8) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Boxes and links of one GPU server.

    Args:
        kind: "sxm" (NVLink to NVSwitch, H100 SXM5) or "pcie" (H100 PCIe cards
            with NVLink bridges between pairs).
        n_gpus: GPUs in the server, an even number in [2, 8].

    Returns:
        ``(nodes, links)``: link labels carry the per-direction rates of
        ``gpu_specs`` and ``interconnect_rates``.
    """
    kind = check_choice("kind", kind, NODE_KINDS)
    n = check_int("n_gpus", n_gpus, 2, 8)
    if n % 2:
        raise ValueError(f"n_gpus must be even, got {n}")
    part = "H100 SXM5" if kind == "sxm" else "H100 PCIe"
    hbm = size_label(_gpu(part, "hbm_bytes"))
    nv = rate_label(_gpu(part, "nvlink_per_direction_Bps"))
    pcie, nic = rate_label(_rate(PCIE)), rate_label(_rate(NDR))
    nodes, links = [], []
    gx = [4 + 12 * i for i in range(n)]
    y_cpu, y_nvs, y_gpu, y_sw, y_nic, y_fab = 0, 12, 24, 42, 56, 70
    for c in range(2):
        nodes.append(
            dict(
                id=f"cpu{c}",
                x=4 + c * 6 * n,
                y=y_cpu,
                w=6 * n - 2,
                h=6,
                kind="CPU",
                label=f"CPU socket {c}",
            )
        )
    links.append(dict(src="cpu0", dst="cpu1", kind="socket", label="", arrow=False))
    for i, x in enumerate(gx):
        nodes.append(
            dict(
                id=f"gpu{i}",
                x=x,
                y=y_gpu,
                w=10,
                h=9,
                kind="GPU",
                label=f"GPU {i}\n{hbm}",
            )
        )
    if kind == "sxm":
        nodes.append(
            dict(
                id="nvswitch",
                x=4,
                y=y_nvs,
                w=12 * n - 2,
                h=6,
                kind="NVSwitch",
                label="NVSwitch chips",
            )
        )
        for i in range(n):
            links.append(
                dict(
                    src=f"gpu{i}",
                    dst="nvswitch",
                    kind="NVLink",
                    label=nv if i == n - 1 else "",
                    arrow=False,
                )
            )
    else:
        for i in range(0, n, 2):
            links.append(
                dict(
                    src=f"gpu{i}",
                    dst=f"gpu{i + 1}",
                    kind="NVLink",
                    label="",
                    arrow=False,
                )
            )
    n_sw = n // 2
    half = max(n_sw // 2, 1)
    for s in range(n_sw):
        nodes.append(
            dict(
                id=f"pcisw{s}",
                x=gx[2 * s] + 1,
                y=y_sw,
                w=20,
                h=6,
                kind="PCIe switch",
                label="PCIe switch",
            )
        )
        links.append(
            dict(
                src=f"pcisw{s}",
                dst=f"cpu{int(s >= half)}",
                kind="PCIe",
                label="",
                arrow=False,
            )
        )
        for g in (2 * s, 2 * s + 1):
            links.append(
                dict(
                    src=f"gpu{g}",
                    dst=f"pcisw{s}",
                    kind="PCIe",
                    label=pcie if g == n - 1 else "",
                    arrow=False,
                )
            )
        for k in (2 * s, 2 * s + 1) if kind == "sxm" else (2 * s,):
            nodes.append(
                dict(
                    id=f"nic{k}",
                    x=gx[k],
                    y=y_nic,
                    w=10,
                    h=6,
                    kind="NIC",
                    label=f"NIC {k}",
                )
            )
            links.append(
                dict(src=f"pcisw{s}", dst=f"nic{k}", kind="PCIe", label="", arrow=False)
            )
            links.append(
                dict(
                    src=f"nic{k}",
                    dst="fabric",
                    kind="fabric",
                    label=nic if k == 0 else "",
                    arrow=False,
                )
            )
    nodes.append(
        dict(
            id="fabric",
            x=4,
            y=y_fab,
            w=12 * n - 2,
            h=5,
            kind="fabric",
            label="to the leaf switches (one port per NIC)",
        )
    )
    return frame(nodes, ()), frame(links, ())


def node_diagram(kind: str = "sxm", n_gpus: int = 8, width: int = 430) -> alt.Chart:
    """One server (see :func:`node_spec`) as a chart."""
    nodes, links = node_spec(kind, n_gpus)
    title = {
        "sxm": "SXM server: NVLink to NVSwitch",
        "pcie": "PCIe server: pairs and sockets",
    }[kind]
    part = "H100 SXM5" if kind == "sxm" else "H100 PCIe"
    nv = rate_label(_gpu(part, "nvlink_per_direction_Bps"))
    sub = {
        "sxm": f"any two GPUs: one NVLink hop, {nv} per GPU per direction",
        "pcie": f"NVLink bridge {nv} within a pair only; GPU 0 to 7 crosses sockets",
    }[kind]
    return box_diagram(
        nodes, links, title=title, subtitle=sub, size=(width, 230), font_size=10
    )


def node_pair_diagram() -> alt.VConcatChart:
    """An SXM server above a PCIe server, drawn alike (stacked to fit a page)."""
    return alt.vconcat(
        node_diagram("sxm", width=600), node_diagram("pcie", width=600)
    ).properties(title="Two eight-GPU servers")


def oversubscription(nodes_per_leaf: int, spines: int) -> float:
    """Down-link ports over up-link ports of a leaf switch (2.0 means 2:1)."""
    return check_int("nodes_per_leaf", nodes_per_leaf, 1) / check_int(
        "spines", spines, 1
    )


def cluster_spec(
    n_nodes: int = 4, rails: int = 4, spines: int = 2
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Nodes on rails, a leaf switch per rail, and spine switches above them.

    NIC ``r`` of every node plugs into leaf ``r`` (a rail), so that GPU ``r`` of
    every node is one switch away from GPU ``r`` of every other. Each leaf has
    ``n_nodes`` ports down and ``spines`` up: ``n_nodes / spines`` is its
    oversubscription. A separate front-end network carries storage traffic.

    Args:
        n_nodes: servers, in [2, 8]; rails: NICs per server, in [1, 8];
        spines: spine switches, in [1, 8].

    Returns:
        ``(nodes, links)``.
    """
    n_nodes = check_int("n_nodes", n_nodes, 2, 8)
    rails = check_int("rails", rails, 1, 8)
    spines = check_int("spines", spines, 1, 8)
    ratio = oversubscription(n_nodes, spines)
    nv = rate_label(_gpu("H100 SXM5", "nvlink_per_direction_Bps"))
    span = 100.0
    nodes, links = [], []
    sw = span / spines
    for s in range(spines):
        nodes.append(
            dict(
                id=f"spine{s}",
                x=s * sw + sw / 2 - 8,
                y=0,
                w=16,
                h=6,
                kind="spine",
                label=f"spine {s}",
            )
        )
    lw = span / rails
    for r in range(rails):
        nodes.append(
            dict(
                id=f"leaf{r}",
                x=r * lw + lw / 2 - 9,
                y=22,
                w=18,
                h=7,
                kind="leaf",
                label=f"rail {r} leaf, {ratio:g}:1",
            )
        )
        for s in range(spines):
            links.append(
                dict(
                    src=f"leaf{r}",
                    dst=f"spine{s}",
                    kind="scale-out",
                    label="",
                    arrow=False,
                )
            )
    nw = span / n_nodes
    for k in range(n_nodes):
        x0 = k * nw + 1
        nodes.append(
            dict(
                id=f"node{k}",
                x=x0,
                y=46,
                w=nw - 2,
                h=16,
                kind="server",
                label=f"\nserver {k}\nNVLink {nv}",
            )
        )
        for r in range(rails):
            nid = f"n{k}r{r}"
            nodes.append(
                dict(
                    id=nid,
                    x=x0 + 1 + r * (nw - 4) / rails,
                    y=47.5,
                    w=(nw - 4) / rails - 0.6,
                    h=4,
                    kind="NIC",
                    label=str(r),
                )
            )
            links.append(
                dict(
                    src=nid,
                    dst=f"leaf{r}",
                    kind="scale-out",
                    label="",
                    arrow=False,
                )
            )
    nodes.append(
        dict(
            id="frontend",
            x=1,
            y=70,
            w=98,
            h=6,
            kind="front end",
            label="front-end network: data, checkpoints",
        )
    )
    nodes.append(
        dict(id="storage", x=40, y=84, w=20, h=6, kind="storage", label="storage")
    )
    for k in range(n_nodes):
        links.append(
            dict(src=f"node{k}", dst="frontend", kind="storage", label="", arrow=False)
        )
    links.append(
        dict(src="frontend", dst="storage", kind="storage", label="", arrow=False)
    )
    return frame(nodes, ()), frame(links, ())


def cluster_diagram(n_nodes: int = 4, rails: int = 4, spines: int = 2) -> alt.Chart:
    """Rails and a two-level fat tree (see :func:`cluster_spec`) as a chart."""
    nodes, links = cluster_spec(n_nodes, rails, spines)
    ratio = oversubscription(n_nodes, spines)
    port = rate_label(_rate(NDR))
    return box_diagram(
        nodes,
        links,
        title="A rail-optimised two-level fat tree",
        subtitle=[
            f"each leaf: {n_nodes} ports down, {spines} up ({ratio:g}:1 "
            f"oversubscribed); every switch link {port} per direction",
            "NVLink inside a server is the scale-up network; storage runs on its own",
        ],
        size=(620, 280),
        font_size=10,
    )


__all__ = [
    "cluster_diagram",
    "cluster_spec",
    "node_diagram",
    "node_pair_diagram",
    "node_spec",
    "oversubscription",
]
