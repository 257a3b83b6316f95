"""Exercise check: is a GPU cheaper per unit of work?"""

from __future__ import annotations

from ._common import not_attempted, passed

__all__ = ["cheaper_on_gpu"]

# (speedup, GPU $/h, CPU $/h, answer, what a wrong answer usually means)
CASES = [
    (100.0, 2.5, 0.05, True, ""),
    (10.0, 2.5, 0.05, False, "the GPU is faster, but is it 50x faster?"),
    (50.0, 2.5, 0.05, False, "at exactly 50x both cost the same: not cheaper"),
    (1.0, 0.04, 0.05, True, "a GPU no faster but cheaper per hour still wins"),
]


def cheaper_on_gpu(fn) -> bool:
    """Check ``fn(speedup, gpu_price, cpu_price) -> bool`` on hand-worked cases."""
    name = "cheaper_on_gpu"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function {name}")
    for speedup, gpu, cpu, want, hint in CASES:
        try:
            got = fn(speedup, gpu, cpu)
        except NotImplementedError:
            return not_attempted(name)
        if bool(got) is not want:
            raise AssertionError(
                f"{name}({speedup}, {gpu}, {cpu}) returned {got!r}, expected {want}: "
                f"{hint or 'compare gpu_price / speedup with cpu_price'}"
            )
    return passed(name, f"right on {len(CASES)} hand-worked cases")
