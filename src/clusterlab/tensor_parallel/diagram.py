"""Tensor and sequence parallelism as pictures: which rank holds which shard."""

from clusterlab.core.diagram import box_diagram, frame


def tensor_parallel_spec(sequence_parallel: bool = False):
    """An MLP split over 2 GPUs: A by columns, B by rows, f and g between.

    Returns:
        ``(nodes, links)``.
    """
    sp = bool(sequence_parallel)
    enter = "g: all-gather" if sp else "f: identity"
    leave = "g-bar:\nreduce-scatter" if sp else "g: all-reduce"
    x_in = "X: S/2 tokens" if sp else "X (all tokens)"
    nodes = [
        dict(id="x", x=0, y=14, w=16, h=8, kind="activation", label=x_in),
        dict(id="f", x=20, y=14, w=16, h=8, kind="collective", label=enter),
    ]
    links = [dict(src="x", dst="f", label="")]
    for g in range(2):
        y = g * 28
        nodes += [
            dict(
                id=f"a{g}",
                x=42,
                y=y,
                w=18,
                h=8,
                kind="weights",
                label=f"A{g + 1}: columns {g + 1}/2",
            ),
            dict(
                id=f"y{g}",
                x=64,
                y=y,
                w=14,
                h=8,
                kind="activation",
                label=f"Y{g + 1} =\nGeLU(X A{g + 1})",
            ),
            dict(
                id=f"b{g}",
                x=82,
                y=y,
                w=16,
                h=8,
                kind="weights",
                label=f"B{g + 1}: rows {g + 1}/2",
            ),
            dict(
                id=f"z{g}",
                x=102,
                y=y,
                w=14,
                h=8,
                kind="activation",
                label=f"Z{g + 1} (partial)",
            ),
        ]
        links += [
            dict(src="f", dst=f"a{g}", label=f"GPU {g}"),
            dict(src=f"a{g}", dst=f"y{g}", label=""),
            dict(src=f"y{g}", dst=f"b{g}", label=""),
            dict(src=f"b{g}", dst=f"z{g}", label=""),
            dict(src=f"z{g}", dst="g", label=""),
        ]
    out = "Z: S/2 tokens" if sp else "Z = Z1 + Z2"
    nodes += [
        dict(id="g", x=120, y=14, w=21, h=8, kind="collective", label=leave),
        dict(id="z", x=144, y=14, w=16, h=8, kind="activation", label=out),
    ]
    links.append(dict(src="g", dst="z", label=""))
    links = [dict(r, kind="data") for r in links]
    return frame(nodes, ()), frame(links, ())


def tensor_parallel_diagram(sequence_parallel: bool = False):
    """Megatron's MLP on 2 GPUs (see :func:`tensor_parallel_spec`)."""
    nodes, links = tensor_parallel_spec(sequence_parallel)
    sub = (
        "sequence parallel: outside the MLP each GPU keeps half the tokens; "
        "the all-reduce becomes an all-gather and a reduce-scatter"
        if sequence_parallel
        else "no communication inside the MLP; one all-reduce (g) forward, "
        "one (f) backward"
    )
    return box_diagram(
        nodes,
        links,
        title="Tensor parallelism: column split, then row split",
        subtitle=sub,
        size=(640, 150),
        font_size=9,
        legend=True,
    )


__all__ = ["tensor_parallel_diagram", "tensor_parallel_spec"]
