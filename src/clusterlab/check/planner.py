"""Exercise check: bytes of model state per parameter under ZeRO."""

from __future__ import annotations

import math

from ..models.memory import model_state_bytes_per_param
from ._common import not_attempted, passed

__all__ = ["zero_bytes_per_param"]

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
