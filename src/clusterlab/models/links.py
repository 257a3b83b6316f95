"""The links the book compares: published line rates and stated assumptions.

A ``Link`` joins a line rate (a row of ``data/interconnect_rates.csv``) to the
assumptions a model needs on top of it: the fraction of the rate an all-reduce
reaches and the latency of one step (rows of ``data/link_assumptions.csv``,
each with its basis). An efficiency is typed once, in that table; NVLink's is
derived there from a published ring all-reduce instead. ``link(name,
efficiency=...)`` changes an assumption for one calculation::

    cl.models.links.LINKS["NDR400 InfiniBand"].effective_Bps   # 40 GB/s
    cl.models.links.link("100GbE TCP", efficiency=0.5)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from clusterlab.core import published
from clusterlab.core.validate import check_choice, check_float
from clusterlab.models.collectives import bus_bandwidth


@dataclass(frozen=True)
class Link:
    """One kind of link: its published line rate and our stated assumptions.

    Attributes:
        name: label used in tables and charts.
        line_rate_bps: bits/s per port and direction (published).
        efficiency: fraction of the line rate a large all-reduce reaches.
        alpha_s: latency of one all-reduce step in seconds (assumed).
        per_gpu: True if every GPU has its own such link (NVLink); False for a
            network port (NIC) shared by the GPUs of a node.
        source: where the line rate and the assumptions come from.
    """

    name: str
    line_rate_bps: float
    efficiency: float
    alpha_s: float
    per_gpu: bool = False
    source: str = ""

    def __post_init__(self):
        check_float("line_rate_bps", self.line_rate_bps, 0.0, low_inclusive=False)
        check_float("efficiency", self.efficiency, 0.0, 1.0, low_inclusive=False)
        check_float("alpha_s", self.alpha_s, 0.0)

    @property
    def per_direction_Bps(self) -> float:
        """Line rate in bytes/s per direction."""
        return self.line_rate_bps / 8

    @property
    def effective_Bps(self) -> float:
        """Bytes/s per direction an all-reduce gets: line rate x efficiency."""
        return self.per_direction_Bps * self.efficiency


def link_assumptions():
    """The assumption rows, each with its line rate and resolved efficiency.

    Returns:
        ``data/link_assumptions.csv`` with ``per_direction_Bps`` (from
        ``interconnect_rates``) and ``efficiency`` (the row's own, or the
        plateau of the published system it names over the line rate).
    """
    df = published.load("link_assumptions")
    rates = published.load("interconnect_rates").set_index("link")
    df["per_direction_Bps"] = rates.loc[df["rate_link"], "per_direction_Bps"].values
    eff = df["efficiency_fraction"].astype(float).to_numpy(copy=True)
    for i, system in enumerate(df["efficiency_from_system"]):
        if isinstance(system, str) and system:
            eff[i] = bus_bandwidth(1e15, system) / df["per_direction_Bps"].iloc[i]
    return df.assign(efficiency=eff)


def _links() -> dict[str, Link]:
    out = {}
    for r in link_assumptions().itertuples():
        rate_src = published.value("interconnect_rates", "source", link=r.rate_link)
        out[r.link] = Link(
            r.link,
            r.per_direction_Bps * 8,
            float(r.efficiency),
            float(r.alpha_s),
            per_gpu=r.attachment == "per_gpu",
            source=f"{rate_src}; {r.source}",
        )
    return out


#: The links of the step-time model, by name, built from the two tables.
LINKS = _links()


def link(name: str, **changes) -> Link:
    """A link from ``LINKS``, with any field changed (e.g. ``efficiency=0.5``)."""
    check_choice("name", name, LINKS)
    return dataclasses.replace(LINKS[name], **changes)


def as_link(value) -> Link:
    """``value`` if it is a ``Link``, else the ``LINKS`` entry of that name."""
    return value if isinstance(value, Link) else link(value)


__all__ = ["LINKS", "Link", "link", "link_assumptions"]
