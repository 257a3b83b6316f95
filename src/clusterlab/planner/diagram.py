"""A parallel layout on nodes as a picture: TP, CP, DP and PP ranks placed."""

from clusterlab.core.diagram import box_diagram, frame
from clusterlab.core.validate import check_int


def layout_spec(
    tp: int = 4, pp: int = 2, dp: int = 2, gpus_per_node: int = 8, cp: int = 1
):
    """GPUs on nodes, each labelled with its (tensor, context, data, pipeline) ranks.

    Global rank ``g = t + tp * (c + cp * (d + dp * p))``: tensor ranks fastest,
    then context, data and pipeline, as Megatron-LM orders them by default
    ("tp-cp-ep-dp-pp"; expert parallelism reuses the data ranks).

    Returns:
        ``nodes`` with ``tp_rank, cp_rank, dp_rank, pp_rank`` columns.
    """
    tp, pp, dp, cp = (
        check_int(n, v, 1, 16)
        for n, v in (("tp", tp), ("pp", pp), ("dp", dp), ("cp", cp))
    )
    per = check_int("gpus_per_node", gpus_per_node, 1, 16)
    world = tp * cp * pp * dp
    if world % per:
        raise ValueError(
            f"tp*cp*pp*dp = {world} must be a multiple of gpus_per_node={per}"
        )
    if world > 64:
        raise ValueError(f"tp*cp*pp*dp = {world} GPUs is too many to draw (<= 64)")
    rows = [
        dict(
            id="fabric",
            x=0,
            y=0,
            w=(per * 9 + 2) * (world // per) - 2,
            h=5,
            kind="fabric",
            label="leaf switches (one rail per GPU index)",
            tp_rank=-1,
            cp_rank=-1,
            dp_rank=-1,
            pp_rank=-1,
        )
    ]
    for k in range(world // per):
        x0 = k * (per * 9 + 2)
        rows.append(
            dict(
                id=f"node{k}",
                x=x0,
                y=9,
                w=per * 9,
                h=24,
                kind="node",
                label="",
                tp_rank=-1,
                cp_rank=-1,
                dp_rank=-1,
                pp_rank=-1,
            )
        )
        rows.append(
            dict(
                id=f"node{k}name",
                x=x0 + 1,
                y=25,
                w=per * 9 - 2,
                h=6,
                kind="node",
                label=f"node {k} (NVLink inside)",
                tp_rank=-1,
                cp_rank=-1,
                dp_rank=-1,
                pp_rank=-1,
            )
        )
    for g in range(world):
        t, c = g % tp, (g // tp) % cp
        d, p = (g // (tp * cp)) % dp, g // (tp * cp * dp)
        k, i = divmod(g, per)
        rows.append(
            dict(
                id=f"gpu{g}",
                x=k * (per * 9 + 2) + i * 9 + 0.5,
                y=11,
                w=8,
                h=12,
                kind=f"pipeline stage {p}",
                label=f"t{t}\nc{c}\nd{d}" if cp > 1 else f"t{t}\nd{d}",
                tp_rank=t,
                cp_rank=c,
                dp_rank=d,
                pp_rank=p,
            )
        )
    return frame(rows, ())


def layout_diagram(
    tp: int = 4, pp: int = 2, dp: int = 2, gpus_per_node: int = 8, cp: int = 1
):
    """The layout of :func:`layout_spec` as a picture."""
    nodes = layout_spec(tp, pp, dp, gpus_per_node, cp)
    n_nodes = tp * cp * pp * dp // gpus_per_node
    ctx = f", CP={cp}" if cp > 1 else ""
    return box_diagram(
        nodes,
        title=f"TP={tp}{ctx}, DP={dp}, PP={pp} on {n_nodes} nodes",
        subtitle="t: tensor rank (inside a node, on NVLink), "
        + ("c: context rank, " if cp > 1 else "")
        + "d: data rank; colour: pipeline stage (its sends cross the fabric)",
        size=(620, 130),
        font_size=9,
        legend=True,
    )


__all__ = ["layout_diagram", "layout_spec"]
