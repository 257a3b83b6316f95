"""Exercise check of the roofline lab: a matmul's arithmetic intensity."""

import math

from clusterlab.collectives.check import _call
from clusterlab.core.checks import not_attempted, passed

_INTENSITY_CASES = [  # (m, n, k, bytes_per_element, expected FLOP/byte)
    (1024, 1024, 1024, 4, 2 * 1024**3 / (4 * 3 * 1024**2)),
    (1, 8192, 8192, 2, 2 * 8192**2 / (2 * (8192 + 8192**2 + 8192))),
    (4096, 8192, 8192, 2, 2048.0),
    (64, 128, 256, 8, 2 * 64 * 128 * 256 / (8 * (64 * 256 + 256 * 128 + 64 * 128))),
]


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


__all__ = ["matmul_intensity"]
