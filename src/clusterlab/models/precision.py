"""Number formats for training: bytes per value, range, rounding, peak FLOP/s.

A format trades range (the exponent bits) against precision (the mantissa
bits). bf16 keeps fp32's 8 exponent bits and so its range; fp16 keeps more
mantissa bits but overflows above 65,504 and flushes small gradients to zero,
which is why fp16 training needs loss scaling (Micikevicius et al. 2018). FP8
comes in two flavours (Micikevicius et al. 2022): e4m3 for weights and
activations, e5m2 for gradients, each scaled per tensor so that its values
fit. A GPU with FP8 tensor cores runs them at twice its 16-bit peak; the
peaks are read from ``data/gpu_specs.csv``.

    >>> from clusterlab.models import precision
    precision.bytes_per_value("fp8")             # 1.0
    precision.peak_flops("H100 SXM5", "fp8")     # 1.979e15 FLOP/s, twice bf16
"""

from __future__ import annotations

import math

from clusterlab.core import published
from clusterlab.core.validate import check_choice

#: RMS relative rounding error of round-to-nearest, in units of the format's
#: epsilon, for values whose mantissas spread log-uniformly over a binade:
#: sqrt(E[1/m^2] / 12) with E[1/m^2] = 3 / (8 ln 2) for m in [1, 2).
ROUNDING_RMS_PER_EPS = math.sqrt(3 / (8 * math.log(2)) / 12)


#: The training precisions the book's models take.
PRECISIONS = ("fp32", "bf16", "fp16", "fp8")


#: The number formats the precision lab measures (fp8 has two flavours).
FORMATS = ("fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2")


#: Bits per value of each precision and format (the format's definition).
_BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "fp8_e4m3": 8, "fp8_e5m2": 8}


_DTYPE_NAME = {
    "fp32": "float32",
    "bf16": "bfloat16",
    "fp16": "float16",
    "fp8": "float8_e4m3fn",
    "fp8_e4m3": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
}


#: Column of ``data/gpu_specs.csv`` that holds each precision's peak.
_PEAK_COLUMN = {
    "fp32": "fp32_flops",
    "bf16": "bf16_dense_flops",
    "fp16": "fp16_dense_flops",
    "fp8": "fp8_dense_flops",
}


def torch_dtype(precision: str):
    """The torch dtype of a precision or format ("fp8" means e4m3).

    Args:
        precision: one of ``PRECISIONS`` or ``FORMATS``.

    Returns:
        The ``torch.dtype``.
    """
    import torch  # only here: the other functions stay free of torch

    check_choice("precision", precision, tuple(_DTYPE_NAME))
    return getattr(torch, _DTYPE_NAME[precision])


def bytes_per_value(precision: str) -> float:
    """Bytes one value takes in a precision.

    Args:
        precision: ``"fp32"``, ``"bf16"``, ``"fp16"`` or ``"fp8"`` (or a
            format of ``FORMATS``).

    Returns:
        Bytes per value (4, 2, 2 or 1), as a float.
    """
    check_choice("precision", precision, tuple(_BITS))
    return _BITS[precision] / 8


def peak_flops(gpu: str, precision: str) -> float:
    """A GPU's published peak FLOP/s in a precision (dense, tensor cores).

    Args:
        gpu: a ``part`` of ``data/gpu_specs.csv``, e.g. ``"H100 SXM5"``.
        precision: ``"fp32"`` (no tensor cores), ``"bf16"``, ``"fp16"`` or
            ``"fp8"``.

    Returns:
        Peak FLOP/s, from the datasheet row (figures quoted with sparsity are
        halved there).

    Raises:
        ValueError: for an unknown GPU or precision, or a GPU without that
            precision's tensor cores (an A100 has no FP8).
    """
    check_choice("precision", precision, PRECISIONS)
    parts = list(published.load("gpu_specs")["part"])
    check_choice("gpu", gpu, parts)
    flops = published.value("gpu_specs", _PEAK_COLUMN[precision], part=gpu)
    if not math.isfinite(flops):
        row = published.row("gpu_specs", part=gpu)
        has = [p for p in PRECISIONS if math.isfinite(float(row[_PEAK_COLUMN[p]]))]
        raise ValueError(
            f"gpu={gpu!r} has no published {precision} peak (no {precision} "
            "tensor cores, or no figure in the book's sources); choose "
            f"precision from {has}"
        )
    return flops


def format_table():
    """Range and rounding of each format in ``FORMATS``, from ``torch.finfo``.

    Returns:
        A DataFrame, one row per format: ``format, bits, exponent_bits,
        mantissa_bits, max_value, min_normal, min_subnormal, epsilon``.
    """
    import pandas as pd
    import torch

    rows = []
    for name in FORMATS:
        fi = torch.finfo(torch_dtype(name))
        mantissa = round(-math.log2(fi.eps))
        exponent = fi.bits - 1 - mantissa
        rows.append(
            {
                "format": name,
                "bits": fi.bits,
                "exponent_bits": exponent,
                "mantissa_bits": mantissa,
                "max_value": float(fi.max),
                "min_normal": float(fi.tiny),
                "min_subnormal": float(fi.smallest_normal * fi.eps),
                "epsilon": float(fi.eps),
            }
        )
    return pd.DataFrame(rows)


def _finfo(precision):
    import torch

    return torch.finfo(torch_dtype(precision))


def underflow_share(values, precision: str, scale: float = 1.0) -> float:
    """Share of ``values * scale`` that rounds to zero in a format.

    Round-to-nearest sends a magnitude below half the smallest subnormal to
    zero.

    Args:
        values: array-like of fp32 values (e.g. a loss's gradient).
        precision: a format of ``PRECISIONS`` or ``FORMATS``.
        scale: the loss scale multiplied in first, > 0.

    Returns:
        The share of nonzero values that become zero, in [0, 1].
    """
    import numpy as np

    if not scale > 0:
        raise ValueError(f"scale={scale!r} must be > 0")
    fi = _finfo(precision)
    v = np.abs(np.asarray(values, dtype=np.float64)).ravel() * scale
    v = v[v > 0]
    if v.size == 0:
        raise ValueError("values are all zero: nothing can underflow")
    return float((v < fi.smallest_normal * fi.eps / 2).mean())


def matmul_relative_error(precision: str, out_precision: str = "bf16") -> float:
    """Predicted relative (Frobenius) error of a matmul with rounded inputs.

    Each input is rounded once (relative error of RMS ``ROUNDING_RMS_PER_EPS *
    eps``), the products add up exactly (fp32 accumulation), and the result is
    rounded once to ``out_precision``; independent errors add in quadrature:
    ``sqrt(2 e_in**2 + e_out**2)``. It holds for inputs scaled into the
    format's normal range (per-tensor scaling), not for values that underflow.

    Args:
        precision: the inputs' format, e.g. "fp8_e4m3", "bf16".
        out_precision: the output's format.

    Returns:
        The relative error, a fraction.
    """
    e_in = ROUNDING_RMS_PER_EPS * _finfo(precision).eps
    e_out = ROUNDING_RMS_PER_EPS * _finfo(out_precision).eps
    if out_precision == "fp32":
        e_out = 0.0
    return math.sqrt(2 * e_in**2 + e_out**2)


def allgather_bytes(n_values: int, precision: str, world_size: int) -> float:
    """Bytes each rank receives in an all-gather of ``n_values`` values.

    Each rank holds ``n_values / world_size`` of them and receives the other
    ranks' shards; FP8 shards also carry one fp32 scale each.

    Args:
        n_values: values in the gathered tensor, >= world_size.
        precision: the wire format, one of ``PRECISIONS``.
        world_size: ranks, >= 2.

    Returns:
        Bytes received per rank.
    """
    from clusterlab.core.validate import check_int

    w = check_int("world_size", world_size, 2)
    n = check_int("n_values", n_values, w)
    shard = n / w * bytes_per_value(precision)
    if precision == "fp8":
        shard += bytes_per_value("fp32")  # the shard's scale
    return (w - 1) * shard


def log2_histogram(values, bin_width: float = 1.0):
    """Counts of ``log2 |value|`` in bins, for drawing values against formats.

    Args:
        values: array-like; zeros are left out.
        bin_width: width of a bin in powers of two, > 0.

    Returns:
        DataFrame ``log2_value`` (bin centre), ``count``, ``share`` (of the
        nonzero values).
    """
    import numpy as np
    import pandas as pd

    if not bin_width > 0:
        raise ValueError(f"bin_width={bin_width!r} must be > 0")
    v = np.abs(np.asarray(values, dtype=np.float64)).ravel()
    v = v[v > 0]
    if v.size == 0:
        raise ValueError("values are all zero: nothing to count")
    bins = np.floor(np.log2(v) / bin_width)
    idx, counts = np.unique(bins, return_counts=True)
    return pd.DataFrame(
        {
            "log2_value": (idx + 0.5) * bin_width,
            "count": counts,
            "share": counts / v.size,
        }
    )


def format_ranges():
    """Each format's range in powers of two, for a chart.

    Returns:
        DataFrame ``format, log2_min_subnormal, log2_min_normal, log2_max``.
    """
    import numpy as np

    t = format_table()
    return t.assign(
        log2_min_subnormal=np.log2(t.min_subnormal),
        log2_min_normal=np.log2(t.min_normal),
        log2_max=np.log2(t.max_value),
    )[["format", "log2_min_subnormal", "log2_min_normal", "log2_max"]]


__all__ = [
    "FORMATS",
    "PRECISIONS",
    "allgather_bytes",
    "bytes_per_value",
    "format_table",
    "matmul_relative_error",
    "peak_flops",
    "torch_dtype",
    "underflow_share",
]
