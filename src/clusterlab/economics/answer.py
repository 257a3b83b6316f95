"""Reference solution: the cloud price that gives a target break-even."""

from __future__ import annotations

from clusterlab.models.economics import onprem_hourly


def price_for_breakeven(target_u: float, **onprem) -> float:
    """Dollars per GPU-hour at which owning and renting cost the same at target_u."""
    cost = onprem_hourly(**onprem)
    return cost["fixed"] / target_u + cost["power"]


__all__ = ["price_for_breakeven"]
