"""The example, simulated: ``n`` workers each draw a value; their sum is the total."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from clusterlab.core.validate import check_int


@dataclass(frozen=True)
class SumParams:
    """What the simulation needs.

    Attributes:
        n_workers: workers, in [1, 1024].
    """

    n_workers: int = 4

    def __post_init__(self):
        check_int("n_workers", self.n_workers, 1, 1024)


def simulate(params: SumParams, seed: int = 0) -> pd.DataFrame:
    """One value per worker and the running total: ``worker, value, total``."""
    values = np.random.default_rng(seed).uniform(0.0, 1.0, params.n_workers)
    return pd.DataFrame(
        {"worker": range(params.n_workers), "value": values, "total": values.cumsum()}
    )
