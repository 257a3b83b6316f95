"""Checks of the economics lab: the break-even exercise, and the capex back-test."""

from __future__ import annotations

import math

from .. import published
from ..models.economics import breakeven_utilization
from ._common import not_attempted, passed

__all__ = ["capex_backtest", "price_for_breakeven"]

CASES = [
    (0.5, {}),
    (0.35, {"lifetime_years": 5.0}),
    (0.85, {"capex_per_gpu": 20_000.0, "price_per_kwh": 0.2}),
]


def price_for_breakeven(fn) -> bool:
    """Check ``fn(target_u, **onprem)``: at its price, the break-even is target_u."""
    name = "price_for_breakeven"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function {name}")
    for target, onprem in CASES:
        try:
            price = fn(target, **onprem)
        except NotImplementedError:
            return not_attempted(name)
        if not isinstance(price, int | float) or not math.isfinite(price):
            raise AssertionError(f"{name}({target}) returned {price!r}; return dollars")
        got = breakeven_utilization(price, **onprem) if price > 0 else math.inf
        if not math.isclose(got, target, rel_tol=1e-6):
            raise AssertionError(
                f"{name}({target}, {onprem}) returned ${price:.3f}, but at that price "
                f"the break-even is {got:.1%}, not {target:.0%}; remember that the "
                "owned cost per useful hour is fixed / u + power"
            )
    return passed(name, f"break-even lands on the target in {len(CASES)} cases")


def capex_backtest(fabric_fn) -> bool:
    """Check a fabric cost model against the published cluster cost model.

    ``fabric_fn(n_gpus)`` must return ``switches`` and ``switches_usd`` and
    ``cables_usd`` (as ``cl.models.cluster_capex.fabric_capex`` does). Every
    row of ``data/cluster_capex_published.csv`` must be reproduced within 0.5%.
    A wrong switch count, a wrong price row or a forgotten term fails.
    """
    name = "capex_backtest"
    if not callable(fabric_fn):
        raise ValueError(f"fabric_fn={fabric_fn!r} must be a function of n_gpus")
    rows = published.load("cluster_capex_published")
    for r in rows.itertuples():
        try:
            got = fabric_fn(int(r.n_gpus))
        except NotImplementedError:
            return not_attempted(name)
        want = {
            "switches": r.switches,
            "switches_usd": r.switches_usd,
            "cables_usd": r.cables_usd,
        }
        for key, value in want.items():
            if not math.isclose(float(got[key]), float(value), rel_tol=5e-3):
                raise AssertionError(
                    f"{name}: for {r.n_gpus} GPUs the model gives {key} = "
                    f"{got[key]:,.0f}, the published cost model {value:,.0f}; "
                    "check the switch layers, (2L - 1) switch ports per GPU port "
                    "and the price rows"
                )
    return passed(name, f"the fabric model reproduces {len(rows)} published clusters")
