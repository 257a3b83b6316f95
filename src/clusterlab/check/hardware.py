"""Exercise checks: bus bandwidth and arithmetic intensity."""

from __future__ import annotations

import math

from ._common import not_attempted, passed

__all__ = ["busbw_from_algbw", "matmul_intensity"]

_BUSBW_CASES = [  # (op, algbw_Bps, world_size, expected busbw_Bps)
    ("all_reduce", 100e9, 8, 175e9),
    ("all_reduce", 2e9, 2, 2e9),
    ("all_gather", 80e9, 4, 60e9),
    ("reduce_scatter", 80e9, 8, 70e9),
    ("broadcast", 50e9, 8, 50e9),
]
_INTENSITY_CASES = [  # (m, n, k, bytes_per_element, expected FLOP/byte)
    (1024, 1024, 1024, 4, 2 * 1024**3 / (4 * 3 * 1024**2)),
    (1, 8192, 8192, 2, 2 * 8192**2 / (2 * (8192 + 8192**2 + 8192))),
    (4096, 8192, 8192, 2, 2048.0),
    (64, 128, 256, 8, 2 * 64 * 128 * 256 / (8 * (64 * 256 + 256 * 128 + 64 * 128))),
]


def _call(fn, name, *args):
    """Run the reader's function; None means it is still a stub."""
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function {name}")
    try:
        return fn(*args)
    except NotImplementedError:
        return None


def busbw_from_algbw(fn) -> bool:
    """Check the exercise: ``fn(op, algbw_Bps, world_size) -> busbw_Bps``."""
    name = "busbw_from_algbw"
    for op, algbw, n, want in _BUSBW_CASES:
        got = _call(fn, name, op, algbw, n)
        if got is None:
            return not_attempted(name)
        if not isinstance(got, int | float) or not math.isclose(
            got, want, rel_tol=1e-6
        ):
            hint = {
                "all_reduce": "an all-reduce is a reduce-scatter then an all-gather: "
                "each rank moves 2(n - 1)/n of the buffer",
                "broadcast": "a broadcast moves the whole buffer once: the factor is 1",
            }.get(op, "all-gather and reduce-scatter move (n - 1)/n of the buffer")
            raise AssertionError(
                f"{name}({op!r}, {algbw:.3g}, {n}) returned {got!r}; expected "
                f"{want:.4g} B/s. Hint: {hint}."
            )
    return passed(name, "all-reduce, all-gather, reduce-scatter and broadcast agree")


def matmul_intensity(fn) -> bool:
    """Check the exercise: ``fn(m, n, k, bytes_per_element) -> FLOP/byte``."""
    name = "matmul_intensity"
    for m, n, k, b, want in _INTENSITY_CASES:
        got = _call(fn, name, m, n, k, b)
        if got is None:
            return not_attempted(name)
        if not isinstance(got, int | float) or not math.isclose(
            got, want, rel_tol=1e-6
        ):
            ratio = got / want if isinstance(got, int | float) and want else None
            hint = (
                "count 2 FLOP per multiply-add: 2·m·n·k"
                if ratio is not None and math.isclose(ratio, 0.5, rel_tol=1e-3)
                else "bytes are (m·k + k·n + m·n) elements times bytes_per_element"
            )
            raise AssertionError(
                f"{name}({m}, {n}, {k}, {b}) returned {got!r}; expected "
                f"{want:.4g} FLOP/byte. Hint: {hint}."
            )
    return passed(name, "square, skinny and fp32/bf16/fp64 cases agree")
