"""Reference solution of the debugging lab's exercise: name a hung job's culprit."""

from __future__ import annotations

import pandas as pd

from clusterlab.debugging.stacks import odd_ranks

#: Functions a rank waits in when it waits for its peers.
COLLECTIVE_CALLS = (
    "all_reduce",
    "all_gather",
    "broadcast",
    "barrier",
    "reduce_scatter",
    "all_to_all",
    "reduce",
    "gather",
    "scatter",
    "send",
    "recv",
    "wait",
)


def diagnose_hung_job(groups: pd.DataFrame, timings: pd.DataFrame) -> tuple:
    """The culprit of a hung job and the cause: ``(rank, cause)``.

    The odd rank is the one whose stack differs from the majority's. If it is
    not in a collective, its own work stopped it (``"data_loader"``). If it is
    in a collective and finished more steps than the others, it skipped one and
    ran ahead (``"skipped_collective"``); at the same step, it called another
    collective than the rest (``"mismatched_collective"``).
    """
    odd = odd_ranks(groups)
    if len(odd) != 1:
        raise ValueError(f"no single odd rank in the dumps (odd ranks: {odd})")
    rank = odd[0]
    top = groups[groups["ranks"].map(lambda rs: rank in rs)]["top"].iloc[0]
    if top not in COLLECTIVE_CALLS:
        return rank, "data_loader"
    finished = timings.dropna(subset=["comm_s"]).groupby("rank")["step"].count()
    others = finished.drop(rank, errors="ignore")
    if finished.get(rank, 0) > (others.max() if len(others) else 0):
        return rank, "skipped_collective"
    return rank, "mismatched_collective"


__all__ = ["COLLECTIVE_CALLS", "diagnose_hung_job"]
