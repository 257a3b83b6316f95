"""Measurement: collective benchmarks in nccl-tests' conventions, alpha–beta fits."""

from .alpha_beta import alpha_beta_holdout, fit_alpha_beta
from .collectives import (
    BUSBW_FACTORS,
    OPS,
    bench_collective,
    bench_vs_plain_loop,
    busbw_factor,
    time_in_group,
)

__all__ = [
    "BUSBW_FACTORS",
    "OPS",
    "alpha_beta_holdout",
    "bench_collective",
    "bench_vs_plain_loop",
    "busbw_factor",
    "fit_alpha_beta",
    "time_in_group",
]

from .._lazy import lazy_attributes  # noqa: E402

# Topic modules added later load on first use, e.g. cl.perf.<topic>.
__getattr__, __dir__ = lazy_attributes(__name__, __path__)
