"""Sweeps across emulated nodes, and the book's recorded runs where none can be made.

``measure`` builds one cluster and times all-reduces across it (every size,
every algorithm, ``reps`` times each) into a tidy table. ``measure_or_recorded``
does that where this machine can emulate nodes, and otherwise returns the
book's recorded run of the same experiment from ``data/cluster_runs.csv``,
with one sentence saying why and where the run was recorded (machine, date,
command). ``scripts/record_cluster_runs.py`` writes that table.
"""

from __future__ import annotations

import pandas as pd

from clusterlab.cluster import support
from clusterlab.cluster.allreduce import bus_bandwidth_Bps, timed_allreduce
from clusterlab.core.validate import check_int

COLUMNS = ("experiment", "nodes", "ranks_per_node", "rate_mbit", "size_mib",
           "algorithm", "rep", "seconds", "busbw_GBps")  # fmt: skip
TABLE = "cluster_runs"


def _sweep(rank, world_size, *, sizes_bytes, per_node, algorithm, reps):
    return [
        timed_allreduce(
            rank,
            world_size,
            size_bytes=s,
            per_node=per_node,
            algorithm=algorithm,
            reps=reps,
        )  # fmt: skip
        for s in sizes_bytes
    ]


def measure(
    experiment: str,
    *,
    nodes: int,
    ranks_per_node: int,
    rates_mbit,
    sizes_mib,
    algorithms=("ring",),
    reps: int = 3,
    timeout: float = 60.0,
) -> pd.DataFrame:
    """Time all-reduces across emulated nodes; one row per size, rate and rep.

    Args:
        experiment: the name written in each row.
        nodes, ranks_per_node: the cluster's shape (flat, one switch).
        rates_mbit: link rates to sweep, Mbit/s (one cluster each).
        sizes_mib: buffer sizes, MiB.
        algorithms: ``"ring"`` and/or ``"hierarchical"``.
        reps: timed repetitions of each, in [1, 20].
        timeout: the process group's timeout, seconds.

    Returns:
        A DataFrame with ``COLUMNS`` (``seconds``: the slowest rank's time).
    """
    from clusterlab.cluster.emulated import EmulatedCluster
    from clusterlab.cluster.launch import launch
    from clusterlab.cluster.topology import Topology

    reps = check_int("reps", reps, 1, 20)
    world = nodes * ranks_per_node
    sizes = [int(m * 2**20) for m in sizes_mib]
    rows = []
    for rate in rates_mbit:
        with EmulatedCluster(Topology(nodes=nodes, rate_mbit=rate)) as c:
            for alg in algorithms:
                per_rank = launch(_sweep, ranks_per_node=ranks_per_node, cluster=c,
                                  timeout=timeout, sizes_bytes=sizes,
                                  per_node=ranks_per_node, algorithm=alg,
                                  reps=reps)  # fmt: skip
                for i, mib in enumerate(sizes_mib):
                    for rep in range(reps):
                        t = max(r[i][rep] for r in per_rank)
                        bw = bus_bandwidth_Bps(sizes[i], t, world) / 1e9
                        rows.append((experiment, nodes, ranks_per_node, rate, mib,
                                     alg, rep, t, bw))  # fmt: skip
    return pd.DataFrame(rows, columns=list(COLUMNS))


def recorded(experiment: str) -> pd.DataFrame:
    """The book's recorded run of ``experiment``, with its provenance columns."""
    import clusterlab.core.published as published

    df = published.load(TABLE)
    hit = df[df["experiment"] == experiment]
    if hit.empty:
        known = sorted(df["experiment"].unique())
        raise ValueError(f"experiment={experiment!r} is not recorded; choose {known}")
    return hit.reset_index(drop=True)


def recorded_note(reason: str, table: pd.DataFrame) -> str:
    """Why a recorded run is shown, and where it was recorded (its first row's
    ``machine``, ``date`` and ``command``)."""
    first = table.iloc[0]
    return (
        f"{reason} Shown instead: the book's run recorded on {first['machine']} on "
        f"{first['date']} with `{first['command']}`."
    )


#: what a table measured here says of itself
MEASURED_HERE = "Measured now, across emulated nodes on this machine."


def here_or_recorded(
    measure_here, recorded_table, columns=None
) -> tuple[pd.DataFrame, str]:
    """``measure_here()`` where nodes can be emulated, else ``recorded_table()``.

    The one rule behind every lab that meets a network: measure across
    emulated nodes where this machine can make them, and otherwise show the
    book's recorded run, saying why and where it was recorded.

    Args:
        measure_here: a function of no arguments that returns the measured table.
        recorded_table: a function of no arguments that returns the recorded
            table with its provenance columns (``machine``, ``date``, ``command``).
        columns: the recorded table's columns to return (all when None), once
            the sentence has read its provenance.

    Returns:
        The table and one sentence: measured here, or why not and what is shown.
    """
    reason = support.why_not()
    if reason is None:
        return measure_here(), MEASURED_HERE
    df = recorded_table()
    note = recorded_note(reason, df)
    return (df if columns is None else df[list(columns)].copy()), note


def measure_or_recorded(experiment: str, **kwargs) -> tuple[pd.DataFrame, str]:
    """``measure`` where nodes can be emulated here, else the recorded run.

    Returns:
        The table and one sentence: measured here, or why not and what is shown.
    """
    return here_or_recorded(
        lambda: measure(experiment, **kwargs), lambda: recorded(experiment)
    )


def measure_and_check(experiment: str, check, *, tries: int = 3, **kwargs):
    """Measure (or take the recorded run) and decide it with ``check``.

    A measured run that misses is measured again, at most ``tries`` times in
    all, saying so with the machine's load (``cl.core.busy.retry``): a busy
    machine slows a try, a wrong model misses every one. The recorded run is
    checked once.

    Args:
        experiment: the experiment's name (``experiments``).
        check: a function of the table that returns its verdict's numbers or
            raises ``AssertionError`` (``verdicts.check_link_fit``, ...).
        tries: measurements at most, in [1, 10].
        **kwargs: ``measure``'s arguments.

    Returns:
        ``(table, what check returned, one sentence on where the table is from)``.
    """
    from clusterlab.core.busy import retry

    if support.why_not() is not None:
        df, note = measure_or_recorded(experiment)
        return df, check(df), note

    def judge(df):
        try:
            check(df)
        except AssertionError as exc:
            return "miss", str(exc).splitlines()[0]
        return "pass", "within the bound"

    outcome = retry(
        lambda: measure(experiment, **kwargs),
        judge,
        what=f"the {experiment} run across emulated nodes",
        hint="a model of the links that is wrong misses on every try",
        tries=tries,
    )
    df = outcome.result
    return df, check(df), MEASURED_HERE
