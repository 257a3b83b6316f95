"""Reference solution: the arithmetic intensity of a matmul."""


def matmul_intensity(m: int, n: int, k: int, bytes_per_element: int) -> float:
    """FLOP per byte of ``C[m, n] = A[m, k] @ B[k, n]``, each matrix moved once.

    2·m·n·k FLOP (a multiply and an add per term) over (m·k + k·n + m·n)
    elements of ``bytes_per_element`` bytes.
    """
    return 2 * m * n * k / (bytes_per_element * (m * k + k * n + m * n))


__all__ = ["matmul_intensity"]
