"""Checks for the precision lab: loss scaling, underflow, FP8 error, a scale.

Each verdict compares a measurement with a model and can fail:

* :func:`check_loss_scaling`: bf16 learns, fp16 without a loss scale does not
  (its gradients underflow), fp16 with one does;
* :func:`check_underflow`: the share of gradients fp16 rounded to zero is what
  the format's smallest subnormal predicts;
* :func:`check_fp8_error`: a matmul's measured error is what rounding each
  input once predicts (``cl.models.precision.matmul_relative_error``).

:func:`per_tensor_scale` grades the exercise.
"""

from __future__ import annotations

import pandas as pd
import torch

from clusterlab.core.checks import not_attempted, passed

#: A run "learns" when its loss falls by this share of the start; one that
#: falls by less than the rest (1 - this) did not.
LEARNED_ENOUGH = 0.8


def learned_share(run: pd.DataFrame) -> float:
    """``1 - last loss / first loss`` of a run (``mixed_precision_run``)."""
    if run.empty or "loss" not in run:
        raise ValueError("run must be a non-empty table with a 'loss' column")
    return float(1 - run["loss"].iloc[-1] / run["loss"].iloc[0])


def check_loss_scaling(runs: dict) -> pd.DataFrame:
    """Decide: bf16 learns; fp16 unscaled does not; fp16 with a scale does.

    Args:
        runs: ``{"bf16": df, "fp16": df, "fp16 scaled": df}`` from
            ``cl.precision.measure.mixed_precision_run``.

    Returns:
        A table ``run, learned, expected, verdict`` ("fits" everywhere).

    Raises:
        AssertionError: a run that learned when it should not, or the reverse.
    """
    expect = {"bf16": True, "fp16": False, "fp16 scaled": True}
    missing = set(expect) - set(runs)
    if missing:
        raise ValueError(f"runs lacks {sorted(missing)}; give all of {list(expect)}")
    rows = []
    for name, learns in expect.items():
        share = learned_share(runs[name])
        ok = share >= LEARNED_ENOUGH if learns else share <= 1 - LEARNED_ENOUGH
        rows.append((name, share, learns, "fits" if ok else "wrong"))
    table = pd.DataFrame(rows, columns=["run", "learned", "expected", "verdict"])
    bad = table[table.verdict != "fits"]
    if len(bad):
        raise AssertionError(
            f"{list(bad.run)} learned {bad.learned.round(3).tolist()} of the loss; "
            f"a run that learns drops at least {LEARNED_ENOUGH:.0%}, one whose "
            f"gradients vanish at most {1 - LEARNED_ENOUGH:.0%}"
        )
    return table


def check_underflow(measured: float, predicted: float, tol: float = 0.01) -> str:
    """Decide that a measured zero share matches the predicted underflow share.

    Args:
        measured: share of gradients that came back exactly zero, in [0, 1].
        predicted: ``cl.models.precision.underflow_share(...)``, in [0, 1].
        tol: largest difference allowed, in [0, 1].

    Returns:
        A sentence with both numbers.

    Raises:
        AssertionError: they differ by more than ``tol``.
    """
    for name, v in (("measured", measured), ("predicted", predicted), ("tol", tol)):
        if not 0 <= v <= 1:
            raise ValueError(f"{name}={v!r} must be in [0, 1]")
    text = f"measured {measured:.2%} of gradients zero, predicted {predicted:.2%}"
    if abs(measured - predicted) > tol:
        raise AssertionError(f"{text}: off by more than {tol:.0%}")
    return text


def check_fp8_error(table: pd.DataFrame, model, low=0.8, high=1.25) -> pd.DataFrame:
    """Decide that each scaled format's measured matmul error fits the model.

    Args:
        table: ``format, scaled, relative_error`` (``cl.precision.measure.
            error_table``); only scaled rows are judged.
        model: a function of the format name returning the predicted error
            (``cl.models.precision.matmul_relative_error``).
        low, high: the allowed range of measured / predicted, 0 < low <= 1 <=
            high.

    Returns:
        The scaled rows with ``predicted``, ``ratio`` and ``verdict``.

    Raises:
        AssertionError: a ratio outside ``[low, high]``.
    """
    if not 0 < low <= 1 <= high:
        raise ValueError(f"low={low!r}, high={high!r}: need 0 < low <= 1 <= high")
    rows = table[table["scaled"]].copy()
    rows["predicted"] = [model(f) for f in rows["format"]]
    rows["ratio"] = rows["relative_error"] / rows["predicted"]
    ok = rows["ratio"].between(low, high)
    rows["verdict"] = ok.map({True: "fits", False: "wrong"})
    if not ok.all():
        bad = rows[~ok]
        raise AssertionError(
            f"{list(bad.format)}: measured / predicted error "
            f"{bad.ratio.round(2).tolist()}, outside [{low}, {high}]"
        )
    return rows


_CASES = [
    (torch.float8_e4m3fn, 1.0),
    (torch.float8_e4m3fn, 1e-3),
    (torch.float8_e5m2, 1e-3),
    (torch.float8_e5m2, 300.0),
]


def per_tensor_scale(fn) -> bool:
    """Check ``fn(t, fmt) -> s`` with ``max |t / s|`` the format's largest value."""
    name = "per_tensor_scale"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function per_tensor_scale")
    gen = torch.Generator().manual_seed(0)
    for fmt, spread in _CASES:
        t = torch.randn(512, generator=gen) * spread
        try:
            got = fn(t, fmt)
        except NotImplementedError:
            return not_attempted(name)
        got = float(got)
        top = torch.finfo(fmt).max
        want = t.abs().max().item() / top
        if abs(got - want) <= 1e-6 * want:
            continue
        hint = "s = max |t| / the format's largest value (torch.finfo(fmt).max)"
        if abs(got - 1 / want) <= 1e-6 / want:
            hint = "that is 1 / s: divide max |t| by the format's largest value"
        elif abs(got - t.abs().max().item() / 448.0) <= 1e-6 * got:
            hint = "448 is e4m3's largest value; e5m2's is 57344: use torch.finfo(fmt)"
        raise AssertionError(
            f"{name}(t with spread {spread:g}, {fmt}) returned {got:.4g}, "
            f"expected {want:.4g}: {hint}"
        )
    return passed(name, f"{len(_CASES)} tensors, e4m3 and e5m2")


__all__ = [
    "LEARNED_ENOUGH",
    "check_fp8_error",
    "check_loss_scaling",
    "check_underflow",
    "learned_share",
    "per_tensor_scale",
]
