"""The fastest of several benchmark passes: noise on a shared machine only adds time.

``bench_collective`` already keeps the best of a few timed blocks inside one
launch; ``bench_best_of`` repeats whole launches and keeps, for each message
size, the fastest row of any pass, so a pass that the scheduler spoiled (another
program took the cores for a moment) does not decide a size.
"""

from __future__ import annotations

import pandas as pd

from clusterlab.core.bench import bench_collective
from clusterlab.core.validate import check_int


def bench_best_of(op: str, sizes, world_size: int, runs: int = 3, iters: int = 5):
    """The fastest of ``runs`` passes of ``bench_collective``, one row per size.

    Args:
        op: an operation of ``bench_collective`` (``all_reduce``, ``ping_pong``...).
        sizes: message sizes in bytes (see ``bench_collective``).
        world_size: ranks, in [1, 64] (2 for ``ping_pong``).
        runs: passes, in [1, 20].
        iters: timed iterations per block and size, in [1, 10000].

    Returns:
        ``bench_collective``'s columns, one row per size, sorted by size.
    """
    runs = check_int("runs", runs, 1, 20)
    passes = [bench_collective(op, sizes, world_size, iters=iters) for _ in range(runs)]
    best = pd.concat(passes).sort_values("time_s").drop_duplicates("size_bytes")
    return best.sort_values("size_bytes").reset_index(drop=True)


__all__ = ["bench_best_of"]
