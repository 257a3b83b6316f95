"""Goodput of per-step fault tolerance against checkpoint-restart (closed forms).

A job of ``n_groups`` replica groups fails on average once every ``mtbf_s``
seconds. Checkpoint-restart stops the whole job at each failure, loses the work
since the last checkpoint and pays a restart: Daly's goodput at Young's
interval (``cl.models.checkpointing``). Per-step fault tolerance loses, per
failure, the time the survivors need to notice and form a smaller quorum
(``recovery_s``, the in-flight step included) on the whole job, and the failed
group's share of the job for the rest of the time until it has been replaced
and has healed (``rejoin_s``, counted from the kill, on one group of
``n_groups``). To first order, valid while the waste is far below the MTBF::

    goodput = 1 - (recovery_s + (rejoin_s - recovery_s) / n_groups) / mtbf_s
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from clusterlab.core.validate import check_float, check_int
from clusterlab.models.checkpointing import goodput, job_mtbf, young_daly_interval


def per_step_waste_s(recovery_s: float, rejoin_s: float, n_groups: int) -> float:
    """Job-seconds lost per failure with per-step recovery.

    ``recovery_s`` of the whole job, then the failed group's ``1 / n_groups``
    share until it rejoins (nothing more when it rejoins before the survivors
    commit again).

    Args:
        recovery_s: the kill to the survivors' next commit, s (>= 0).
        rejoin_s: the kill to the failed group's first commit again, s (>= 0).
        n_groups: replica groups, in [2, 100000].
    """
    recovery_s = check_float("recovery_s", recovery_s, 0.0)
    rejoin_s = check_float("rejoin_s", rejoin_s, 0.0)
    n_groups = check_int("n_groups", n_groups, 2, 100_000)
    return recovery_s + max(0.0, rejoin_s - recovery_s) / n_groups


def per_step_goodput(
    mtbf_s: float, recovery_s: float, rejoin_s: float, n_groups: int
) -> float:
    """First-order goodput of per-step fault tolerance, in [0, 1].

    Args:
        mtbf_s: the job's mean time between failures, s (> 0).
        recovery_s, rejoin_s, n_groups: see ``per_step_waste_s``.
    """
    mtbf_s = check_float("mtbf_s", mtbf_s, 0.0, low_inclusive=False)
    waste = per_step_waste_s(recovery_s, rejoin_s, n_groups)
    return float(max(0.0, 1.0 - waste / mtbf_s))


def checkpoint_restart_goodput(
    mtbf_s: float, checkpoint_cost_s: float, restart_s: float
) -> float:
    """Daly's goodput of checkpoint-restart at Young's interval, in [0, 1].

    Young's ``sqrt(2 C M)`` is within a few percent of the best interval, where
    the goodput curve is flat (the checkpointing lab measures it).
    """
    tau = young_daly_interval(checkpoint_cost_s, mtbf_s)
    return float(goodput(tau, checkpoint_cost_s, mtbf_s, restart_s))


def goodput_table(
    log2_gpus,
    *,
    gpu_mtbf_s: float,
    checkpoint_cost_s: float,
    restart_s: float,
    recovery_s: float,
    n_groups: int,
) -> pd.DataFrame:
    """Both goodputs over job sizes: ``gpus, job_mtbf_s, method, goodput``.

    The failed group is replaced in ``restart_s`` (the same restart the
    checkpointed job pays), so per-step recovery's ``rejoin_s`` is ``restart_s``.
    """
    rows = []
    for k in np.asarray(log2_gpus, dtype=int):
        gpus = int(2**k)
        m = job_mtbf(gpu_mtbf_s, gpus)
        ckpt = checkpoint_restart_goodput(m, checkpoint_cost_s, restart_s)
        step = per_step_goodput(m, recovery_s, restart_s, n_groups)
        rows += [
            dict(gpus=gpus, log2_gpus=int(k), job_mtbf_s=m, method=name, goodput=g)
            for name, g in (("checkpoint-restart", ckpt), ("per-step recovery", step))
        ]
    return pd.DataFrame(rows)


__all__ = [
    "checkpoint_restart_goodput",
    "goodput_table",
    "per_step_goodput",
    "per_step_waste_s",
]
