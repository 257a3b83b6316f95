"""Cost per useful GPU-hour: reserved against on-demand capacity, and failures.

A reserved cloud GPU is paid for every hour of its term, used or not, at a
lower rate than an on-demand one, which is paid only while used. Reserving a
fraction ``f`` of the capacity a job needs, and renting the rest on demand
while the job runs (a fraction ``u`` of hours), costs per hour of capacity::

    f * reserved + (1 - f) * u * on_demand

so per useful GPU-hour ``f * reserved / u + (1 - f) * on_demand``.

Failures waste hours on every option alike: a job that keeps a fraction
``goodput`` of its GPU-hours (the rest lost to checkpoints, restarts and
re-done work, from ``cl.models.checkpointing.goodput``) pays ``cost / goodput``
per GPU-hour of work it keeps.
"""

from __future__ import annotations

import math

import pandas as pd

from clusterlab.core.validate import check_float, check_int
from clusterlab.models.checkpointing import goodput, job_mtbf, optimal_interval
from clusterlab.models.economics import useful_hour_cost

_MAX_HOURLY = 1e3


_MAX_BILL = 1e15


def cloud_hourly(
    utilization: float,
    *,
    on_demand_price: float,
    reserved_price: float,
    reserved_fraction: float = 0.0,
) -> dict:
    """The cloud bill per GPU of capacity per hour, reserved and on demand.

    Args:
        utilization: fraction of hours the job runs, in [0, 1].
        on_demand_price: dollars per on-demand GPU-hour, in (0, 1000].
        reserved_price: dollars per reserved GPU-hour, in (0, 1000].
        reserved_fraction: share of the capacity reserved, in [0, 1].

    Returns:
        Dollars per hour per GPU of capacity: ``reserved`` (paid whether used
        or not), ``on_demand``, ``total``, and ``per_useful_hour`` (``total /
        utilization``; ``math.inf`` at zero use).
    """
    u = check_float("utilization", utilization, 0.0, 1.0)
    od = check_float(
        "on_demand_price", on_demand_price, 0.0, _MAX_HOURLY, low_inclusive=False
    )
    rs = check_float(
        "reserved_price", reserved_price, 0.0, _MAX_HOURLY, low_inclusive=False
    )
    f = check_float("reserved_fraction", reserved_fraction, 0.0, 1.0)
    reserved = f * rs
    on_demand = (1.0 - f) * u * od
    total = reserved + on_demand
    return {
        "reserved": reserved,
        "on_demand": on_demand,
        "total": total,
        "per_useful_hour": total / u if u > 0 else math.inf,
    }


def cost_after_failures(cost: float, goodput_fraction: float) -> float:
    """What a cost becomes per unit of kept work when only a fraction is kept.

    Args:
        cost: dollars paid, per GPU-hour or for a whole run, in [0, 1e15].
        goodput_fraction: fraction of the paid hours whose work is kept, (0, 1].

    Returns:
        ``cost / goodput_fraction``: dollars per GPU-hour of kept work, or the
        bill for the same kept work.
    """
    paid = check_float("cost", cost, 0.0, _MAX_BILL)
    g = check_float("goodput_fraction", goodput_fraction, 0.0, 1.0, low_inclusive=False)
    return paid / g


def cluster_goodput(
    n_gpus: int, gpu_mtbf_s: float, checkpoint_cost_s: float, restart_s: float = 0.0
) -> dict:
    """Goodput of a job on ``n_gpus`` GPUs that checkpoints at the best interval.

    Args:
        n_gpus: GPUs the job needs, in [1, 10**7]; any one failing stops it.
        gpu_mtbf_s: mean time between failures of one GPU (with its share of
            the server), seconds, > 0.
        checkpoint_cost_s: seconds to write one checkpoint, > 0.
        restart_s: seconds from a failure to work resuming, >= 0.

    Returns:
        ``{"job_mtbf_s", "interval_s", "goodput"}`` from
        ``cl.models.checkpointing``.
    """
    n = check_int("n_gpus", n_gpus, 1, 10**7)
    mtbf = job_mtbf(gpu_mtbf_s, n)
    tau = optimal_interval(checkpoint_cost_s, mtbf, restart_s)
    return {
        "job_mtbf_s": mtbf,
        "interval_s": tau,
        "goodput": goodput(tau, checkpoint_cost_s, mtbf, restart_s),
    }


def cost_options(
    utilization: float,
    goodput_fraction: float,
    *,
    on_demand_price: float,
    reserved_price: float,
    **onprem,
) -> pd.DataFrame:
    """Owned, reserved and on-demand GPU-hours, per GPU-hour of kept work.

    Args:
        utilization: fraction of hours the job runs, in (0, 1].
        goodput_fraction: fraction of the hours it runs whose work is kept.
        on_demand_price, reserved_price: dollars per cloud GPU-hour.
        **onprem: the inputs of ``cl.models.economics.onprem_hourly``.

    Returns:
        One row per option with ``per_useful_hour`` (dollars per GPU-hour the
        job runs) and ``per_kept_hour`` (after failures).
    """
    u = check_float("utilization", utilization, 0.0, 1.0, low_inclusive=False)
    prices = {"on_demand_price": on_demand_price, "reserved_price": reserved_price}
    per_useful = {
        "owned": useful_hour_cost(u, **onprem),
        "reserved": cloud_hourly(u, **prices, reserved_fraction=1.0)["per_useful_hour"],
        "on demand": cloud_hourly(u, **prices)["per_useful_hour"],
    }
    return pd.DataFrame(
        [
            {
                "option": name,
                "per_useful_hour": cost,
                "per_kept_hour": cost_after_failures(cost, goodput_fraction),
            }
            for name, cost in per_useful.items()
        ]
    )


__all__ = ["cloud_hourly", "cluster_goodput", "cost_after_failures", "cost_options"]
