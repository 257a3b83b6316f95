"""Exercise checks: model state per parameter under ZeRO, and per GPU in 5-D."""

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


__all__ = ["state_bytes_per_gpu", "zero_bytes_per_param"]
