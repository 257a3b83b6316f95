"""Low precision measured: fp16 under- and overflow, loss scaling, FP8 matmuls.

* :func:`mixed_precision_run` trains a small regression the mixed-precision way
  (Micikevicius et al. 2018): fp32 master weights, the forward and backward
  passes in bf16 or fp16, the gradients cast back to fp32 for the update. Its
  loss is a mean over many outputs, as a language model's is over tokens, so
  each output's gradient is tiny: in fp16 it rounds to zero, in bf16 (fp32's
  range) it does not, and multiplying the loss by a scale before the backward
  pass (and the gradients by its inverse after) lifts it back into fp16's
  range. Too large a scale overflows instead; dynamic scaling halves it and
  skips that step.
* :func:`fp8_matmul_error` multiplies random matrices in bf16 and in FP8 (e4m3
  or e5m2, each tensor scaled so that its largest value meets the format's
  largest, then ``torch._scaled_mm``) and measures the error against fp32.

Everything runs on a CPU.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd
import torch

from clusterlab.core.validate import check_choice, check_float, check_int
from clusterlab.models.precision import torch_dtype

_COMPUTE = ("fp32", "bf16", "fp16")


@contextlib.contextmanager
def _one_thread():
    # These tensors are tiny: more threads only fight over busy cores (20 times
    # slower measured on a loaded two-core machine). The caller's setting comes
    # back afterwards.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _problem(seed, batch=32, features=8, outputs=2048, offset=1e-4, size=1e-2):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, features, generator=gen)
    w_true = size * torch.randn(features, outputs, generator=gen)
    # The start is close to the answer: late in training, residuals are small.
    w0 = w_true + offset * torch.randn(features, outputs, generator=gen)
    return x, x @ w_true, w0


def mixed_precision_run(
    precision: str,
    loss_scale: float | None = None,
    *,
    dynamic: bool = False,
    steps: int = 10,
    lr: float = 0.5,
    seed: int = 0,
) -> pd.DataFrame:
    """Train ``y = x @ w`` with fp32 master weights and low-precision passes.

    Args:
        precision: "fp32", "bf16" or "fp16": the forward and backward passes'.
        loss_scale: factor on the loss before backward (gradients divided by
            it after); None for no scaling. In (0, 2**40].
        dynamic: halve the scale and skip the step when a gradient overflows
            (inf or nan), as ``torch.amp.GradScaler`` does.
        steps: optimizer steps, in [1, 1000].
        lr: learning rate as a share of the largest stable one, in (0, 1].
        seed: the data's seed.

    Returns:
        One row per step: ``step, loss`` (fp32, from the master weights
        before the step), ``zero_grad_share`` (share of the gradient at the
        output, in the low precision, that is exactly 0), ``overflow`` (a
        non-finite gradient: step skipped), ``scale`` (the loss scale used)
        and ``precision``.
    """
    check_choice("precision", precision, _COMPUTE)
    scale = 1.0 if loss_scale is None else check_float("loss_scale", loss_scale,
                                                       0.0, 2.0**40,
                                                       low_inclusive=False)  # fmt: skip
    check_int("steps", steps, 1, 1000)
    check_float("lr", lr, 0.0, 1.0, low_inclusive=False)
    with _one_thread():
        return _run(torch_dtype(precision), precision, scale, dynamic, steps, lr, seed)


def _run(dtype, precision, scale, dynamic, steps, lr, seed):
    x, y, w = _problem(seed)
    n_out = y.numel()
    # The loss's curvature along w is 2 x^T x / n_out; step at lr of 1 / top.
    step_size = lr * n_out / (2 * torch.linalg.eigvalsh(x.T @ x).max().item())
    rows = []
    for step in range(steps):
        loss = ((x @ w - y) ** 2).mean().item()
        w_low = w.detach().to(dtype).clone().requires_grad_()
        out = x.to(dtype) @ w_low
        out.retain_grad()
        # The loss in fp32, as autocast computes it; its gradient enters the
        # low-precision backward pass at ``out``, where it can underflow.
        low_loss = ((out.float() - y) ** 2).mean()
        (low_loss * scale).backward()
        grad = w_low.grad.float() / scale
        overflow = not torch.isfinite(grad).all().item()
        zero = (out.grad == 0).float().mean().item()
        rows.append((step, loss, zero, overflow, scale))
        if overflow:
            scale = scale / 2 if dynamic else scale
            continue
        w = w - step_size * grad
    cols = ["step", "loss", "zero_grad_share", "overflow", "scale"]
    return pd.DataFrame(rows, columns=cols).assign(precision=precision)


def quantize_per_tensor(t: torch.Tensor, fmt: str = "fp8_e4m3", scaled: bool = True):
    """Cast ``t`` to an FP8 format with one scale for the whole tensor.

    Args:
        t: a float tensor.
        fmt: "fp8_e4m3" or "fp8_e5m2".
        scaled: divide by ``amax / max_value`` first, so that the largest
            entry meets the format's largest; False casts as it is.

    Returns:
        ``(q, scale)``: the FP8 tensor and the fp32 scale (a 0-d tensor) with
        ``q.float() * scale`` close to ``t``.
    """
    check_choice("fmt", fmt, ("fp8_e4m3", "fp8_e5m2"))
    dtype = torch_dtype(fmt)
    top = torch.finfo(dtype).max
    scale = torch.tensor(1.0)
    if scaled:
        scale = (t.abs().max().float() / top).clamp(min=1e-30)
    return (t.float() / scale).clamp(-top, top).to(dtype), scale


def _rel_err(got, want):
    return ((got.float() - want).norm() / want.norm()).item()


def fp8_matmul_error(
    n: int = 256, fmt: str = "fp8_e4m3", *, spread: float = 1.0, seed: int = 0
) -> dict:
    """Relative error of an n x n x n matmul in bf16 and in FP8, against fp32.

    Args:
        n: matrix size, in [16, 4096] (a multiple of 16, as ``_scaled_mm``
            asks).
        fmt: the FP8 format, "fp8_e4m3" or "fp8_e5m2".
        spread: the inputs' standard deviation, in (0, 1e4]: small values show
            what per-tensor scaling saves.
        seed: the inputs' seed.

    Returns:
        ``{"bf16": e, fmt: e, fmt + "_unscaled": e}``: relative Frobenius
        errors (FP8 through ``torch._scaled_mm`` with bf16 output; unscaled
        is the plain cast, scale 1).
    """
    n = check_int("n", n, 16, 4096)
    if n % 16:
        raise ValueError(f"n={n} must be a multiple of 16 for torch._scaled_mm")
    check_choice("fmt", fmt, ("fp8_e4m3", "fp8_e5m2"))
    spread = check_float("spread", spread, 0.0, 1e4, low_inclusive=False)
    with _one_thread():
        return _matmul_errors(n, fmt, spread, seed)


def _matmul_errors(n, fmt, spread, seed):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(n, n, generator=gen) * spread
    b = torch.randn(n, n, generator=gen) * spread
    want = a @ b
    out = {"bf16": _rel_err(a.bfloat16() @ b.bfloat16(), want)}
    for scaled, key in ((True, fmt), (False, f"{fmt}_unscaled")):
        qa, sa = quantize_per_tensor(a, fmt, scaled)
        qb, sb = quantize_per_tensor(b, fmt, scaled)
        # _scaled_mm wants its second operand column-major: pass b^T's transpose.
        got = torch._scaled_mm(
            qa, qb.t().contiguous().t(), scale_a=sa, scale_b=sb,
            out_dtype=torch.bfloat16,
        )  # fmt: skip
        out[key] = _rel_err(got, want)
    return out


def error_table(n: int = 256, seed: int = 0) -> pd.DataFrame:
    """:func:`fp8_matmul_error` for both FP8 formats, as one tidy table.

    Returns:
        Rows ``format, scaled, relative_error`` for bf16, e4m3 and e5m2.
    """
    rows = [("bf16", True, fp8_matmul_error(n, seed=seed)["bf16"])]
    for fmt in ("fp8_e4m3", "fp8_e5m2"):
        got = fp8_matmul_error(n, fmt, seed=seed)
        rows += [(fmt, True, got[fmt]), (fmt, False, got[f"{fmt}_unscaled"])]
    return pd.DataFrame(rows, columns=["format", "scaled", "relative_error"])


def loss_gradient(seed: int = 0) -> np.ndarray:
    """The fp32 gradient of :func:`mixed_precision_run`'s loss at its output, step 0.

    Returns:
        ``dloss/dout``, one value per output (batch x outputs), unscaled: what
        the low-precision backward pass receives, times the loss scale.
    """
    x, y, w = _problem(seed)
    return (2 * (x @ w - y) / y.numel()).numpy()


def fp8_allgather_worker(rank, world_size, n_values=1 << 16, seed=0):
    """All-gather one weight tensor's shards in fp32, bf16 and FP8 (e4m3).

    Each rank holds ``n_values / world_size`` fp32 weights (every rank builds
    the same tensor from ``seed``, so each can check what it gathered). FP8
    shards travel as bytes, with one fp32 scale per shard.

    Args:
        rank, world_size: as ``cl.launch`` passes them.
        n_values: values in the whole tensor, a multiple of world_size.
        seed: the weights' seed.

    Returns:
        A list of dicts, one per format: ``precision, received_bytes`` (the
        other ranks' tensors this rank received, counted at c10d's all-gather
        operator by ``cl.core.counting.count_collectives``), ``relative_error`` of the
        gathered tensor against the fp32 weights, and ``time_s``.
    """
    import time

    import torch.distributed as dist

    from clusterlab.core.counting import count_collectives

    n = check_int("n_values", n_values, world_size)
    if n % world_size:
        raise ValueError(f"n_values={n} must be a multiple of world_size")
    gen = torch.Generator().manual_seed(seed)
    full = torch.randn(n, generator=gen) * 0.02
    shard = full.chunk(world_size)[rank]
    rows = []
    for precision in ("fp32", "bf16", "fp8"):
        t0 = time.perf_counter()
        if precision == "fp8":
            q, scale = quantize_per_tensor(shard, "fp8_e4m3")
            wire = [q.view(torch.uint8), scale.reshape(1)]
        else:
            # gloo moves raw bytes: send bf16 as the bytes of the same bits
            low = shard.to(torch_dtype(precision))
            wire = [low.view(torch.uint8) if precision == "bf16" else low]
        got = []
        with count_collectives() as counted:  # below torch.distributed
            for t in wire:
                parts = [torch.empty_like(t) for _ in range(world_size)]
                dist.all_gather(parts, t)
                got.append(parts)
        received = sum(r["received_bytes"] for r in counted.records
                       if r["op"] == "all_gather")  # fmt: skip
        if precision == "fp8":
            pieces = [b.view(torch.float8_e4m3fn).float() * s
                      for b, s in zip(got[0], got[1], strict=True)]  # fmt: skip
        elif precision == "bf16":
            pieces = [b.view(torch.bfloat16).float() for b in got[0]]
        else:
            pieces = got[0]
        gathered = torch.cat(pieces)
        rows.append(
            {
                "precision": precision,
                "received_bytes": int(received),
                "relative_error": ((gathered - full).norm() / full.norm()).item(),
                "time_s": time.perf_counter() - t0,
            }
        )
    return rows


__all__ = [
    "error_table",
    "fp8_allgather_worker",
    "fp8_matmul_error",
    "loss_gradient",
    "mixed_precision_run",
    "quantize_per_tensor",
]
