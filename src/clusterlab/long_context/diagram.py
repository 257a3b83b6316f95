"""Ring attention as a picture: query blocks stay, key and value blocks travel."""

from clusterlab.core.diagram import box_diagram, frame
from clusterlab.core.validate import check_int


def ring_attention_spec(n: int = 4, causal: bool = True):
    """Which key/value block each rank attends to at each step of the ring.

    At step ``k`` rank ``r`` holds block ``(r - k) mod n`` of K and V, computes
    with it, and passes it to rank ``r + 1``. With ``causal`` a rank skips
    blocks from later in the sequence (``j > r``).

    Returns:
        ``(nodes, links, n_steps)`` with ``n_steps = n``.
    """
    n = check_int("n", n, 2, 8)
    nodes, links = [], []
    for r in range(n):
        nodes.append(
            dict(
                id=f"q{r}",
                x=0,
                y=r * 10,
                w=14,
                h=7,
                kind="query",
                label=f"rank {r}: Q{r}",
            )
        )
    for k in range(n):
        for r in range(n):
            j = (r - k) % n
            skip = causal and j > r
            nodes.append(
                dict(
                    id=f"s{k}r{r}",
                    x=20 + k * 18,
                    y=r * 10,
                    w=15,
                    h=7,
                    t0=k,
                    kind="skipped (causal)" if skip else "computed",
                    label=f"K{j},V{j}",
                )
            )
            if k + 1 < n:
                links.append(
                    dict(
                        src=f"s{k}r{r}",
                        dst=f"s{k + 1}r{(r + 1) % n}",
                        t0=k + 1,
                        kind="pass on",
                        label="",
                        straight=True,
                    )
                )
    return frame(nodes, ()), frame(links, ()), n


def ring_attention_diagram(n: int = 4, causal: bool = True):
    """Ring attention's blocks going round (see :func:`ring_attention_spec`)."""
    nodes, links, n_steps = ring_attention_spec(n, causal)
    return box_diagram(
        nodes,
        links,
        title=f"Ring attention on {n} ranks: K and V blocks go round",
        subtitle="each step a rank attends its queries to one block and sends the "
        "block on, while the next arrives",
        size=(560, 40 * n),
        n_steps=n_steps,
        legend=True,
    )


__all__ = ["ring_attention_diagram", "ring_attention_spec"]
