"""What GPU-hours cost: owning a cluster against renting one, and a run's bill.

An owned GPU costs money every hour of its life whether it works or not
(purchase spread over its lifetime, plus operations); it costs power only while
it works. A rented GPU costs its price for each hour you use it. So the owned
GPU's cost per *useful* hour falls as its utilisation rises, and crosses the
cloud price at the break-even utilisation::

    fixed / u + power = cloud price   =>   u* = fixed / (cloud price - power)

Every input is a keyword with a default whose source or assumption is stated
below; prices move, so each default names its date. Units: dollars, hours,
watts; utilisation is a fraction in (0, 1].
"""

from __future__ import annotations

import math

from .._validate import check_float

__all__ = [
    "DEFAULTS",
    "breakeven_utilization",
    "io_bound_cost",
    "onprem_hourly",
    "run_cost",
    "useful_hour_cost",
]

HOURS_PER_YEAR = 8760.0

#: Defaults for one H100 GPU in an owned cluster, with where each comes from.
DEFAULTS = {
    # An HGX H100 node with 8 x 400G InfiniBand is about $310K (2023-24 estimates),
    # i.e. $38,750 per GPU before the network switches.
    "capex_per_gpu": 310_000 / 8,
    # Assumption: GPUs are written off over 4 years (3-5 is common).
    "lifetime_years": 4.0,
    # A DGX H100 draws about 10.2 kW at most for 8 GPUs: 1,275 W per GPU, with
    # its share of CPUs, memory and network cards.
    "watts_per_gpu": 10_200 / 8,
    # Assumptions: power usage effectiveness of the machine room, and the price
    # of electricity.
    "pue": 1.3,
    "price_per_kwh": 0.10,
    # Assumption: staff, space, support contracts and spares cost 10% of the
    # purchase price per year.
    "ops_fraction_per_year": 0.10,
}


def onprem_hourly(
    *,
    capex_per_gpu: float = DEFAULTS["capex_per_gpu"],
    lifetime_years: float = DEFAULTS["lifetime_years"],
    watts_per_gpu: float = DEFAULTS["watts_per_gpu"],
    pue: float = DEFAULTS["pue"],
    price_per_kwh: float = DEFAULTS["price_per_kwh"],
    ops_fraction_per_year: float = DEFAULTS["ops_fraction_per_year"],
) -> dict:
    """An owned GPU's cost per hour, split into what every hour costs and power.

    Args:
        capex_per_gpu: purchase price per GPU, its share of servers and network
            included, dollars, in (0, 1e7].
        lifetime_years: years over which the purchase is spread, in (0, 20].
        watts_per_gpu: power drawn per busy GPU with its share of the server, W,
            in [0, 1e5].
        pue: power usage effectiveness of the machine room, in [1, 5].
        price_per_kwh: electricity, dollars per kWh, in [0, 10].
        ops_fraction_per_year: operations per year as a fraction of the
            purchase price, in [0, 5].

    Returns:
        ``{"capital", "operations", "fixed", "power"}`` in dollars per GPU-hour;
        ``fixed`` (capital + operations) is paid every hour, ``power`` only
        while the GPU works.
    """
    capex = check_float("capex_per_gpu", capex_per_gpu, 0.0, 1e7, low_inclusive=False)
    years = check_float(
        "lifetime_years", lifetime_years, 0.0, 20.0, low_inclusive=False
    )
    watts = check_float("watts_per_gpu", watts_per_gpu, 0.0, 1e5)
    pue = check_float("pue", pue, 1.0, 5.0)
    kwh = check_float("price_per_kwh", price_per_kwh, 0.0, 10.0)
    ops = check_float("ops_fraction_per_year", ops_fraction_per_year, 0.0, 5.0)
    capital = capex / (years * HOURS_PER_YEAR)
    operations = capex * ops / HOURS_PER_YEAR
    power = watts / 1000.0 * pue * kwh
    return {
        "capital": capital,
        "operations": operations,
        "fixed": capital + operations,
        "power": power,
    }


def useful_hour_cost(utilization: float, **onprem) -> float:
    """Dollars per useful GPU-hour of an owned GPU busy a fraction of the time.

    Args:
        utilization: fraction of hours the GPU does useful work, in (0, 1].
        **onprem: the inputs of ``onprem_hourly``.

    Returns:
        ``fixed / utilization + power``, dollars per useful GPU-hour.
    """
    u = check_float("utilization", utilization, 0.0, 1.0, low_inclusive=False)
    cost = onprem_hourly(**onprem)
    return cost["fixed"] / u + cost["power"]


def breakeven_utilization(cloud_price_per_gpu_hour: float, **onprem) -> float:
    """The utilisation above which owning is cheaper than renting.

    Args:
        cloud_price_per_gpu_hour: what a rented GPU-hour costs, dollars,
            in (0, 1000].
        **onprem: the inputs of ``onprem_hourly``.

    Returns:
        ``fixed / (cloud price - power)``, a fraction. A value above 1 means
        owning never pays, even at full use; ``math.inf`` when the cloud price
        does not even cover the owned GPU's power.
    """
    price = check_float(
        "cloud_price_per_gpu_hour",
        cloud_price_per_gpu_hour,
        0.0,
        1000.0,
        low_inclusive=False,
    )
    cost = onprem_hourly(**onprem)
    margin = price - cost["power"]
    return math.inf if margin <= 0 else cost["fixed"] / margin


def run_cost(
    n_params: float,
    n_tokens: float,
    n_gpus: int,
    peak_flops: float,
    mfu: float,
    price_per_gpu_hour: float,
) -> dict:
    """The bill for one training run, from the 6·N·D rule.

    Args:
        n_params: model parameters, in (0, 1e15].
        n_tokens: training tokens, in (0, 1e16].
        n_gpus: GPUs used, in [1, 1e6].
        peak_flops: peak FLOP/s of one GPU, in (0, 1e17].
        mfu: model FLOPs utilisation, in (0, 1].
        price_per_gpu_hour: dollars per GPU-hour, in [0, 1000].

    Returns:
        ``{"seconds", "gpu_hours", "dollars"}`` for the run.
    """
    from .compute import training_time

    seconds = training_time(n_params, n_tokens, n_gpus, peak_flops, mfu)
    price = check_float("price_per_gpu_hour", price_per_gpu_hour, 0.0, 1000.0)
    gpu_hours = seconds / 3600.0 * n_gpus
    return {"seconds": seconds, "gpu_hours": gpu_hours, "dollars": gpu_hours * price}


def io_bound_cost(
    data_bytes: float, n_nodes: int, node_io_Bps: float, node_price_per_hour: float
) -> dict:
    """Time and cost of a job whose speed is set by reading its data from disk.

    When disk I/O is the bottleneck, faster arithmetic does not help: the job
    takes ``data / (nodes x disk bandwidth per node)`` whatever the processors.

    Args:
        data_bytes: bytes to read, in (0, 1e21].
        n_nodes: nodes reading in parallel, in [1, 1e6].
        node_io_Bps: sustained read bandwidth of one node, bytes/s, in (0, 1e12].
        node_price_per_hour: what one node costs per hour, dollars, in [0, 1e4].

    Returns:
        ``{"seconds", "dollars"}`` for the job.
    """
    data = check_float("data_bytes", data_bytes, 0.0, 1e21, low_inclusive=False)
    nodes = check_float("n_nodes", n_nodes, 1.0, 1e6)
    io = check_float("node_io_Bps", node_io_Bps, 0.0, 1e12, low_inclusive=False)
    price = check_float("node_price_per_hour", node_price_per_hour, 0.0, 1e4)
    seconds = data / (nodes * io)
    return {"seconds": seconds, "dollars": seconds / 3600.0 * nodes * price}
