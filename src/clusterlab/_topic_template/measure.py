"""The example measured: launch the ranks, and return what each one saw."""

from __future__ import annotations

import pandas as pd

from clusterlab.core.launcher import launch
from clusterlab.core.validate import check_int


def measure_total(world_size: int = 2, value: float = 1.0) -> pd.DataFrame:
    """The all-reduced total on each rank: ``rank, world_size, total``."""
    world_size = check_int("world_size", world_size, 1, 8)
    from clusterlab._topic_template.ranks import total

    results = launch(total, world_size, value=value)
    return pd.DataFrame(
        {"rank": range(world_size), "world_size": world_size, "total": results}
    )
