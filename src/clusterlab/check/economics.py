"""Exercise check: the cloud price that makes a target break-even."""

from __future__ import annotations

import math

from ..models.economics import breakeven_utilization
from ._common import not_attempted, passed

__all__ = ["price_for_breakeven"]

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
