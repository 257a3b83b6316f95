"""Checks for failure detection: the exercise (a heartbeat detector's detection
time), and false suspicions measured across a lossy link held to the closed form."""

from __future__ import annotations

import math

import numpy as np

from clusterlab.core.checks import not_attempted, passed

# (timeout_s, interval_s, mean_delay_s): slow and fast heartbeats, short and long
# delays, so that each term of the answer changes the result.
_DETECTION_CASES = [(2.0, 1.0, 0.1), (5.0, 2.0, 0.5), (0.5, 0.2, 0.01), (3.0, 0.5, 1.0)]


def _call(fn, name, *args):
    try:
        return fn(*args), None
    except NotImplementedError:
        return None, not_attempted(name)


def mean_detection_time(fn) -> bool:
    """Check the exercise: ``fn(timeout_s, interval_s, mean_delay_s)``."""
    name = "mean_detection_time"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function {name}")
    for t, dt, d in _DETECTION_CASES:
        got, stub = _call(fn, name, t, dt, d)
        if stub is not None:
            return stub
        want = t + d - dt / 2
        if not isinstance(got, int | float | np.floating) or not math.isfinite(got):
            raise AssertionError(f"{name}{(t, dt, d)} returned {got!r}: return seconds")
        if math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12):
            continue
        if math.isclose(got, t + d, rel_tol=1e-9):
            hint = "the crash falls on average halfway through an interval"
        elif math.isclose(got, t - dt / 2, rel_tol=1e-9):
            hint = "the last heartbeat sent before the crash is still on its way"
        elif math.isclose(got, t + d + dt / 2, rel_tol=1e-9):
            hint = "the last heartbeat left before the crash, not after it"
        else:
            hint = (
                "add up: silence the detector waits, delay, and where the crash falls"
            )
        raise AssertionError(
            f"{name}(timeout_s={t}, interval_s={dt}, mean_delay_s={d}) returned "
            f"{got:.4g} s; expected {want:.4g} s. Hint: {hint}."
        )
    return passed(
        name, f"matches T + delay - interval/2 on {len(_DETECTION_CASES)} cases"
    )


def false_alarms_match(table) -> bool:
    """Each timeout's false suspicions lie in the closed form's Poisson range.

    Args:
        table: ``cl.failures.lossy.model_table`` rows (``timeout_ms``,
            ``false_alarms``, ``expected``, ``low``, ``high``).

    Raises:
        AssertionError: a count the closed form (independent losses at the
            measured rate, the measured jitter) does not allow.
    """
    from clusterlab.core.chart_checks import check_columns

    check_columns(table, ["timeout_ms", "false_alarms", "expected", "low", "high"])
    if len(table) == 0:
        raise ValueError("table has no rows: allowed one per timeout")
    off = table[
        (table["false_alarms"] < table["low"]) | (table["false_alarms"] > table["high"])
    ]
    if len(off):
        r = off.iloc[0]
        raise AssertionError(
            f"at a {r['timeout_ms']:g} ms timeout the detector suspected the live "
            f"sender {int(r['false_alarms'])} times; independent losses at the "
            f"measured rate allow {int(r['low'])} to {int(r['high'])} (expected "
            f"{r['expected']:.1f}): the losses are not independent, or the model "
            "counts the wrong gaps"
        )
    shown = ", ".join(
        f"{t:g} ms: {int(n)} (expected {e:.1f})"
        for t, n, e in zip(table["timeout_ms"], table["false_alarms"],
                           table["expected"], strict=True)
    )  # fmt: skip
    return passed("false_alarms_match", shown)


__all__ = ["false_alarms_match", "mean_detection_time"]
