"""What a cluster's money buys, as a picture: servers, fabric, storage, facility."""

import altair as alt
import pandas as pd

from clusterlab.core import published
from clusterlab.core.diagram import box_diagram, frame

CAPEX_PARTS = (
    ("servers_usd", "servers"),
    ("switches_usd", "switches"),
    ("cables_usd", "cables"),
    ("facility_ops_usd", "facility, operations"),
)


def capex_spec(n_gpus: int = 512) -> pd.DataFrame:
    """A published cluster's cost, one box per purchase, widths by share.

    Args:
        n_gpus: a row of ``cluster_capex_published`` (512 or 1024 GPUs).

    Returns:
        ``nodes`` with ``usd`` and ``share`` columns.
    """
    row = published.row("cluster_capex_published", n_gpus=n_gpus)
    total = sum(row[c] for c, _ in CAPEX_PARTS)
    rows, x = [], 0.0
    for col, name in CAPEX_PARTS:
        share = row[col] / total
        w = max(share * 100, 1.5)
        text = f"{name}\n${row[col] / 1e6:.1f}M ({share:.0%})" if share > 0.08 else ""
        rows.append(
            dict(
                id=col,
                x=x,
                y=0,
                w=w,
                h=12,
                kind=name,
                label=text,
                usd=row[col],
                share=share,
            )
        )
        x += w
    return frame(rows, ())


def capex_diagram(n_gpus: int = 512) -> alt.LayerChart:
    """The cost split of :func:`capex_spec`."""
    nodes = capex_spec(n_gpus)
    small = nodes[nodes["share"] <= 0.08]
    rest = ", ".join(
        f"{k} ${u / 1e6:.2f}M" for k, u in zip(small["kind"], small["usd"], strict=True)
    )
    return box_diagram(
        nodes,
        title=f"What a {n_gpus}-GPU cluster costs up front",
        subtitle=f"the servers are most of it; narrow boxes: {rest}",
        size=(600, 80),
        legend=True,
    )


__all__ = ["capex_diagram", "capex_spec"]
