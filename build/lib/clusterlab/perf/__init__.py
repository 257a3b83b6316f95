"""Measurement: collective benchmarks in nccl-tests' conventions, alpha–beta fits."""

from .alpha_beta import fit_alpha_beta
from .collectives import BUSBW_FACTORS, OPS, bench_collective, busbw_factor

__all__ = ["BUSBW_FACTORS", "OPS", "bench_collective", "busbw_factor", "fit_alpha_beta"]
