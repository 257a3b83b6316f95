"""Checks of the economics lab: the break-even exercise, the capex back-test,
and the break-even formula against an hour-by-hour ledger."""

from __future__ import annotations

import math

from clusterlab.core import published
from clusterlab.core.checks import not_attempted, passed
from clusterlab.models.economics import breakeven_utilization

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


def breakeven_ledger_backtest(breakeven_fn, prices=None) -> bool:
    """Check a break-even model against a lifetime ledger at every cloud price.

    The ledger (``cl.models.breakeven.ledger_breakeven``) adds up an owned
    GPU's dollars over its life hour by hour and bisects for the utilisation
    at which they meet the cloud price; it never uses the per-hour formula.
    ``breakeven_fn(price)`` must agree within 0.01% of utilisation, or say
    (with a value above 1) that owning never pays where the ledger finds so.
    A forgotten idle draw, a PUE on the wrong term or a wrong lifetime fails.

    Args:
        breakeven_fn: dollars per GPU-hour -> break-even utilisation.
        prices: cloud prices to test; default: every row of ``cloud_prices()``.
    """
    from clusterlab.models.breakeven import ledger_breakeven
    from clusterlab.models.economics import cloud_prices

    name = "breakeven_ledger_backtest"
    if not callable(breakeven_fn):
        raise ValueError(f"breakeven_fn={breakeven_fn!r} must be a function of price")
    prices = list(cloud_prices()["usd"]) if prices is None else list(prices)
    for p in prices:
        got, want = float(breakeven_fn(p)), ledger_breakeven(p)
        agree = got > 1 if math.isinf(want) else abs(got - want) < 1e-4
        if not agree:
            raise AssertionError(
                f"{name}: at ${p:.2f} per GPU-hour the model breaks even at "
                f"{got:.2%}, the lifetime ledger at {want:.2%}; check that idle "
                "power is paid every hour, the PUE multiplies both draws, and "
                "the purchase is spread over the lifetime"
            )
    return passed(
        name, f"the break-even matches a lifetime ledger at {len(prices)} prices"
    )


def pipeline_gpu_gain(traits, hw=None, name: str = "data preprocessing") -> float:
    """How much faster a GPU runs a measured pipeline; it must be under 3x (W5).

    W5 says such pipelines would run 3x faster on CPUs, because the disks, not
    the arithmetic, set the pace. From the pipeline kernel's measured traits
    (``cl.roofline.workloads.measure_traits``), Amdahl's law gives the most a GPU could
    speed it up; a GPU that gains 3x or more would make W5's trap no trap.

    Args:
        traits: measured traits with a row for ``name``.
        hw: hardware and prices; default ``reference_hardware()``.
        name: the pipeline's workload.

    Returns:
        The GPU's speedup of the whole job.

    Raises:
        AssertionError: when the measured traits let a GPU gain 3x or more.
    """
    from clusterlab.models.decide import (
        job_speedup,
        measured_workloads,
        reference_hardware,
    )

    hw = reference_hardware() if hw is None else hw
    row = traits[traits["workload"] == name]
    if row.empty:
        raise ValueError(f"traits has no row workload={name!r}")
    gain = job_speedup(measured_workloads(row)[name], hw)["job_speedup"]
    if not gain < 3.0:
        raise AssertionError(
            f"{name}: the measured traits let a GPU run it {gain:.1f}x faster; "
            "is the pipeline dense rather than I/O- and branch-bound?"
        )
    return gain


__all__ = [
    "breakeven_ledger_backtest",
    "capex_backtest",
    "pipeline_gpu_gain",
    "price_for_breakeven",
]
