"""Pictures for experts and long sequences: token routing with all-to-all, and
ring attention's key/value blocks going round the ring.

``moe_routing_spec`` draws tokens on two ranks, the router's choice of expert
for each, the all-to-all that sends each token to its expert's rank, and the
all-to-all that brings the outputs back; ``ring_attention_spec`` shows which
key/value block each rank attends to at each step (causal blocks skipped).
Both step with a slider.
"""

from __future__ import annotations

from clusterlab.core.diagram import ALWAYS, box_diagram, frame
from clusterlab.core.validate import check_int

#: Default routing of 8 tokens to 4 experts (top-1), as a router might pick.
DEFAULT_ROUTES = (2, 0, 3, 1, 0, 2, 1, 3)


def moe_routing_spec(expert_ids=DEFAULT_ROUTES, n_experts: int = 4, n_ranks: int = 2):
    """Tokens, experts on ranks, and the two all-to-alls between them.

    Args:
        expert_ids: the expert each token is routed to (token ``i`` lives on
            rank ``i * n_ranks // len(expert_ids)``).
        n_experts: experts, a multiple of ``n_ranks``; expert ``e`` lives on
            rank ``e // (n_experts // n_ranks)``.

    Returns:
        ``(nodes, links, n_steps)``: 0 the router's choice, 1 dispatch, 2 combine.
    """
    n_experts = check_int("n_experts", n_experts, 1, 16)
    n_ranks = check_int("n_ranks", n_ranks, 1, 8)
    if n_experts % n_ranks:
        raise ValueError(f"n_experts={n_experts} must be a multiple of n_ranks")
    ids = [check_int("expert_ids", e, 0, n_experts - 1) for e in expert_ids]
    per = n_experts // n_ranks
    nodes, links = [], []
    for e in range(n_experts):
        nodes.append(
            dict(
                id=f"e{e}",
                x=4 + e * 22,
                y=30,
                w=18,
                h=8,
                kind="expert",
                label=f"expert {e} (rank {e // per})",
            )
        )
    n_tok = len(ids)
    # Step 0: the router (gate) scores each token and picks its expert.
    nodes.append(
        dict(
            id="router", x=2, y=15, w=n_tok * 11 - 2, h=7, t0=0, t1=1,
            kind="router", label="router: picks an expert for each token (t2→e3: "
            "token 2 to expert 3); nothing has moved yet",
        )
    )  # fmt: skip
    for i, e in enumerate(ids):
        r = i * n_ranks // n_tok
        x = 2 + i * 11
        nodes.append(
            dict(
                id=f"t{i}",
                x=x,
                y=0,
                w=9,
                h=7,
                kind=f"token of rank {r}",
                label=f"t{i}→e{e}",
            )
        )
        nodes.append(
            dict(id=f"o{i}", x=x, y=60, w=9, h=7, t0=2, kind="output", label=f"y{i}")
        )
        links.append(
            dict(
                src=f"t{i}",
                dst="router",
                t0=0,
                t1=1,
                kind="route",
                label="",
                straight=False,
            )  # fmt: skip
        )
        links.append(
            dict(
                src=f"t{i}",
                dst=f"e{e}",
                t0=1,
                t1=2,
                kind="dispatch",
                label="",
                straight=True,
            )
        )
        links.append(
            dict(
                src=f"e{e}",
                dst=f"o{i}",
                t0=2,
                t1=ALWAYS,
                kind="combine",
                label="",
                straight=True,
            )
        )
    return frame(nodes, ()), frame(links, ()), 3


def moe_routing_diagram(
    expert_ids=DEFAULT_ROUTES, n_experts: int = 4, n_ranks: int = 2
):
    """Routing, dispatch (all-to-all) and combine (all-to-all), stepped."""
    nodes, links, n_steps = moe_routing_spec(expert_ids, n_experts, n_ranks)
    return box_diagram(
        nodes,
        links,
        title="Experts: each token goes to the rank of its expert, and back",
        subtitle="step 0: the router picks; step 1: all-to-all dispatch; step 2: "
        "experts compute, all-to-all combine back in token order",
        size=(600, 210),
        n_steps=n_steps,
        font_size=9,
        legend=True,
    )


__all__ = ["moe_routing_diagram", "moe_routing_spec"]
