"""Reference solution: is a GPU cheaper per unit of work?"""

from __future__ import annotations


def cheaper_on_gpu(speedup: float, gpu_price: float, cpu_price: float) -> bool:
    """True when ``gpu_price / speedup`` (per unit of work) is below ``cpu_price``."""
    return gpu_price / speedup < cpu_price


__all__ = ["cheaper_on_gpu"]
