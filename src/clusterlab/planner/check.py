"""Exercise checks: model state per parameter under ZeRO, and per GPU in 5-D;
the planner's claims over its unknowns, and its fp8 gain against a published one."""

from __future__ import annotations

import math

from clusterlab.core.checks import not_attempted, passed
from clusterlab.models.memory import model_state_bytes_per_param

_CASES = [(stage, dp) for stage in range(4) for dp in (1, 2, 8, 64)]


def _hint(fn, stage, dp, got, want) -> str:
    if math.isclose(got, 16.0):
        return "it is 16 whatever the stage: ZeRO shards state over the dp replicas"
    for wrong_stage in range(4):
        if math.isclose(got, model_state_bytes_per_param(wrong_stage, dp)):
            return (
                f"that is stage {wrong_stage}'s answer: stage 1 shards the 12 "
                "optimizer bytes, stage 2 also the 2 gradient bytes, stage 3 "
                "also the 2 weight bytes"
            )
    return "start from 2 + 2 + 12 bytes and divide the sharded parts by dp"


def zero_bytes_per_param(fn) -> bool:
    """Check the exercise: ``fn(zero_stage, dp)`` -> bytes per parameter."""
    name = "zero_bytes_per_param"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function zero_bytes_per_param")
    for stage, dp in _CASES:
        try:
            got = fn(stage, dp)
        except NotImplementedError:
            return not_attempted(name)
        want = model_state_bytes_per_param(stage, dp)
        try:
            ok = math.isclose(float(got), want, rel_tol=1e-9)
        except (TypeError, ValueError):
            raise AssertionError(
                f"{name}({stage}, {dp}) returned {got!r}; return a number of bytes"
            ) from None
        if not ok:
            raise AssertionError(
                f"{name}(zero_stage={stage}, dp={dp}) returned {got} but the "
                f"answer is {want:g} bytes; {_hint(fn, stage, dp, float(got), want)}"
            )
    return passed(name, "stages 0-3 on 1, 2, 8 and 64 replicas")


# (dense params, expert params, tp, pp, dp, ep, zero stage): DeepSeek-V3-like
# and dense cases, every ZeRO stage.
_LAYOUTS = [
    (17e9, 654e9, 1, 16, 128, 64, 1),
    (17e9, 654e9, 1, 16, 128, 8, 2),
    (17e9, 654e9, 2, 8, 128, 16, 3),
    (70e9, 0.0, 8, 4, 32, 1, 0),
    (70e9, 0.0, 8, 4, 32, 1, 1),
]


def _want(dense, experts, tp, pp, dp, ep, zero):
    own = dense / (tp * pp) * model_state_bytes_per_param(zero, dp)
    return own + experts / (pp * ep) * model_state_bytes_per_param(zero, dp // ep)


def _state_hint(case, got) -> str:
    dense, experts, tp, pp, dp, ep, zero = case
    if math.isclose(got, _want(dense, experts, tp, pp, dp, 1, zero), rel_tol=1e-6):
        return "the routed experts are split over the ep GPUs of a group: divide by ep"
    if ep > 1 and math.isclose(
        got,
        dense / (tp * pp) * model_state_bytes_per_param(zero, dp)
        + experts / (pp * ep) * model_state_bytes_per_param(zero, dp),
        rel_tol=1e-6,
    ):
        return (
            "ZeRO shards an expert's state only over the replicas that hold that "
            "expert: dp // ep of them, not dp"
        )
    if math.isclose(got, (dense + experts) / (tp * pp) * 16, rel_tol=1e-6):
        return "that is 16 bytes per parameter on tp*pp: apply ZeRO and split experts"
    return (
        "dense part: dense/(tp*pp) x bytes per parameter at this ZeRO stage over dp; "
        "experts: experts/(pp*ep) x bytes per parameter over dp // ep"
    )


def state_bytes_per_gpu(fn) -> bool:
    """Check the exercise: ``fn(dense, experts, tp=, pp=, dp=, ep=, zero_stage=)``."""
    name = "state_bytes_per_gpu"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function state_bytes_per_gpu")
    for case in _LAYOUTS:
        dense, experts, tp, pp, dp, ep, zero = case
        kw = dict(tp=tp, pp=pp, dp=dp, ep=ep, zero_stage=zero)
        try:
            got = fn(dense, experts, **kw)
        except NotImplementedError:
            return not_attempted(name)
        want = _want(*case)
        try:
            ok = math.isclose(float(got), want, rel_tol=1e-6)
        except (TypeError, ValueError):
            raise AssertionError(
                f"{name} returned {got!r}; return a number of bytes"
            ) from None
        if not ok:
            raise AssertionError(
                f"{name}({dense:.3g}, {experts:.3g}, {kw}) returned {got:.4g} but "
                f"the answer is {want:.4g} bytes; {_state_hint(case, float(got))}"
            )
    return passed(name, "DeepSeek-V3-like and dense layouts, ZeRO stages 0-3")


def _responds(table, name: str, value: str, rising: bool = True) -> None:
    """Fail if ``value`` does not move with the overlap and with the curve."""
    curves = table["curve"].unique()
    overlaps = table["tp_overlap"].unique()
    if len(curves) < 2 or len(overlaps) < 2:
        raise ValueError(
            f"the {name} table has {len(curves)} curve(s) and {len(overlaps)} "
            "overlap(s); a range needs at least two of each"
        )
    for curve, rows in table.groupby("curve", sort=False):
        v = rows.sort_values("tp_overlap")[value].to_numpy()
        moved = (v[1:] > v[:-1]) if rising else (v[1:] < v[:-1])
        if not moved.all():
            raise AssertionError(
                f"{name}: on {curve} {value} does not "
                f"{'rise' if rising else 'fall'} as more tensor-parallel traffic "
                "hides: the model ignores the overlap"
            )
    first = table[table["tp_overlap"] == min(overlaps)]
    if first[value].nunique() < 2:
        raise AssertionError(
            f"{name}: with nothing hidden every curve gives the same {value}: the "
            "model ignores the curve"
        )


def h6_is_a_range(table) -> dict:
    """Decide claim H6's costs over the curve and the share of TP hidden.

    ``cl.models.planner_ranges.h6_range``'s table must respond to both
    unknowns (more hidden, a smaller exposed TP share; the curves differ),
    and in every cell the recipe must stay below the fastest plan the planner
    finds for the same GPUs and batch: the recipe is a choice whose costs, the
    bubble and the exposed TP traffic, are accepted, whatever the curve.

    Args:
        table: ``h6_range(recipe)`` with ``best=True``.

    Returns:
        ``{"mfu": (low, high), "tp_share": (low, high), "bubble": b}``.
    """
    from clusterlab.core.chart_checks import check_columns

    need = ["curve", "tp_overlap", "tp_share", "bubble", "mfu", "best_mfu"]
    check_columns(table, need, "the H6 table")
    _responds(table, "H6", "tp_share", rising=False)
    best = table[table["mfu"] >= table["best_mfu"]]
    if len(best):
        r = best.iloc[0]
        raise AssertionError(
            f"on {r.curve} with {r.tp_overlap:.0%} hidden the recipe is the planner's "
            f"fastest plan ({r.mfu:.1%} MFU): its bubble would cost nothing"
        )
    out = {
        "mfu": (float(table.mfu.min()), float(table.mfu.max())),
        "tp_share": (float(table.tp_share.min()), float(table.tp_share.max())),
        "bubble": float(table.bubble.iloc[0]),
    }
    passed(
        "h6_is_a_range",
        f"the recipe's MFU bound spans {out['mfu'][0]:.0%}-{out['mfu'][1]:.0%} and its "
        f"exposed TP {out['tp_share'][0]:.0%}-{out['tp_share'][1]:.0%} of the step "
        f"(bubble {out['bubble']:.0%}); below the fastest plan in every cell",
    )
    return out


def l2_over_the_range(table) -> dict:
    """Decide L2's first half: data parallelism beats TP 8 for 7B, in every cell.

    ``cl.models.planner_ranges.l2_range``'s table must respond to both
    unknowns (the TP plan gets faster as more of its traffic hides, and the
    curves differ), and ``dp_over_tp`` must exceed 1 in every cell: a cell
    where TP is as fast (all of its traffic hidden, say) fails the claim.

    Args:
        table: ``l2_range()``'s table.

    Returns:
        ``{"dp_over_tp": (low, high)}``.
    """
    from clusterlab.core.chart_checks import check_columns

    need = ["curve", "tp_overlap", "tp_tokens_per_s", "dp_over_tp"]
    check_columns(table, need, "the L2 table")
    _responds(table, "L2", "tp_tokens_per_s", rising=True)
    lost = table[~(table["dp_over_tp"] > 1.0)]
    if len(lost):
        r = lost.iloc[0]
        raise AssertionError(
            f"on {r.curve} with {r.tp_overlap:.0%} of TP hidden, TP 8 is as fast as "
            f"data parallelism ({r.dp_over_tp:.2f}x): L2's 'TP wastes resources' fails"
        )
    lo, hi = float(table.dp_over_tp.min()), float(table.dp_over_tp.max())
    passed(
        "l2_over_the_range", f"data parallelism {lo:.2f}x to {hi:.2f}x faster than TP 8"
    )
    return {"dp_over_tp": (lo, hi)}


def _gain_hint(r, column: str) -> str:
    """Why a model's fp8 gain misses the published one, from its row."""
    gain = r[column]
    if gain >= 1.8:
        return (
            "a gain near 2x prices every FLOP at twice the bf16 rate; only the "
            "linear layers' GEMMs run in fp8, below their peak, and the rest of "
            "the step does not speed up"
        )
    if gain <= 1.02:
        return (
            "no gain: fp8 is priced like bf16, but its tensor-core peak is twice "
            "bf16's and the linear layers' GEMMs run in it"
        )
    share = r.get("model_bf16_share")
    if gain > r["published_gain"] and share is not None and share == share:
        return (
            f"the model's bf16 step is {share:.0%} of the measured one: it counts "
            "only the matmuls, and the work it leaves out (norms, element-wise "
            "ops, casts, the optimizer) does not speed up in fp8"
        )
    if gain > r["published_gain"]:
        return "the model leaves out work that fp8 does not speed up"
    return (
        "the model's fp8 step is so short that traffic it cannot hide (FSDP's "
        "gathers over the network) sets it, where the measured step, longer, "
        "hides it"
    )


def fp8_gain_agrees(table, column: str = "model_gain", tolerance=None) -> dict:
    """Decide whether a model's end-to-end fp8 gain is the published one.

    ``cl.models.fp8_gain.fp8_gain_table``'s rows are published bf16 and fp8
    runs of one layout on one system; a model agrees when, on every run, its
    gain (bf16 step over fp8 step) is within ``tolerance`` of the published
    gain, relatively. A model that doubles every FLOP (a gain near 2) fails,
    and so does one in which fp8 buys nothing (a gain of 1).

    Args:
        table: ``fp8_gain_table()`` (columns ``run, published_gain`` and
            ``column``).
        column: the model's gain: ``"model_gain"`` (the planner's) or
            ``"gain_with_other"`` (with the work it leaves out held fixed).
        tolerance: the allowed relative difference, in (0, 1); None for
            ``cl.models.fp8_gain.GAIN_TOLERANCE`` (10%, justified there).

    Returns:
        ``{run: {"model_gain": g, "published_gain": p, "off": g / p - 1}}``.
    """
    from clusterlab.core.chart_checks import check_columns
    from clusterlab.core.validate import check_float
    from clusterlab.models.fp8_gain import GAIN_TOLERANCE

    check_columns(table, ["run", "published_gain", column], "the fp8 gain table")
    if table.empty:
        raise ValueError("the fp8 gain table has no run to compare")
    tol = GAIN_TOLERANCE if tolerance is None else tolerance
    tol = check_float("tolerance", tol, 0.0, 1.0, low_inclusive=False)
    out = {}
    for _, r in table.iterrows():
        gain, pub = float(r[column]), float(r["published_gain"])
        off = gain / pub - 1.0
        if not abs(off) <= tol:
            raise AssertionError(
                f"{r['run']}: the model's fp8 gain is {gain:.2f}x against the "
                f"published {pub:.2f}x ({off:+.0%}, beyond {tol:.0%}); "
                f"{_gain_hint(r, column)}"
            )
        out[r["run"]] = {"model_gain": gain, "published_gain": pub, "off": off}
    worst = max(out.values(), key=lambda v: abs(v["off"]))
    passed(
        "fp8_gain_agrees",
        f"{len(out)} published run(s): the model's fp8 gain is within {tol:.0%} of "
        f"the measured one (at worst {worst['model_gain']:.2f}x against "
        f"{worst['published_gain']:.2f}x)",
    )
    return out


__all__ = [
    "fp8_gain_agrees",
    "h6_is_a_range",
    "l2_over_the_range",
    "state_bytes_per_gpu",
    "zero_bytes_per_param",
]
