"""One bounded retry for timing checks, and a busy machine said in words.

A timing measured on a shared machine can miss its bound because other programs
took the cores, not because the model is wrong. Every check that compares a
model with a timing therefore goes through :func:`retry`: it measures, asks a
judge for one of four verdicts, and acts on it the same way everywhere:

* ``"pass"``: within the bound; done.
* ``"miss"``: outside the bound. The machine may have been busy, so it says so
  with the machine's load (:func:`load_note`) and measures again; a miss on the
  last try raises ``AssertionError`` with the hint. A wrong model misses every
  try, so it still fails.
* ``"busy"``: a miss that the run itself shows the machine's load explains (a
  rank woken late, a heartbeat that really came late, repeats too spread to
  resolve the effect). It measures again; after the last try the check ends
  undecided, said in words, without raising.
* ``"wrong"``: a miss no load can explain (noise only adds time, so a run faster
  than the model allows is the model's fault): it raises at once.

After the last try the last verdict decides. A judge may return ``True`` and
``False`` for ``"pass"`` and ``"miss"``, the common case of one bound.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from clusterlab.core.validate import check_int

#: What a judge may say of one measurement.
VERDICTS = ("pass", "miss", "busy", "wrong")


#: The most measurements one check may take.
MAX_TRIES = 10


def load_note() -> str:
    """How busy this machine is now, in words: its 1-minute load and its cores."""
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:  # not every system reports a load average
        return f"{cores} cores, load unknown"
    busy = "busy" if load > cores else "not saturated"
    return f"load average {load:.1f} on {cores} cores: {busy}"


@dataclass(frozen=True)
class Outcome:
    """What :func:`retry` ended with.

    Attributes:
        verdict: ``"pass"``, or ``"busy"`` when the machine stayed too busy to
            decide (said in words; nothing raised).
        result: the last measurement.
        text: the judge's sentence about it.
        tries: measurements taken, the last included.
        judged: what the judge returned for it (a verdict's dict keeps its
            tables and numbers here).
    """

    verdict: str
    result: Any
    text: str
    tries: int
    judged: Any = None

    @property
    def decided(self) -> bool:
        """True when the check passed, False when it was left undecided."""
        return self.verdict == "pass"


def _verdict_of(judged) -> tuple[str, str]:
    """``(verdict, text)`` from a judge's ``(verdict, text)`` or dict."""
    if isinstance(judged, Mapping):
        verdict, text = judged.get("status"), judged.get("text")
    elif isinstance(judged, tuple) and len(judged) == 2:
        verdict, text = judged
    else:
        raise ValueError(
            f"judge returned {judged!r}: it must return (verdict, text) or a dict "
            "with 'status' and 'text'"
        )
    if isinstance(verdict, bool | np.bool_):
        verdict = "pass" if verdict else "miss"
    if verdict not in VERDICTS:
        raise ValueError(
            f"judge's verdict={verdict!r} is not allowed: choose one of "
            + ", ".join(repr(v) for v in VERDICTS)
            + " (or True / False for pass / miss)"
        )
    return verdict, str(text)


def retry(
    measure: Callable,
    judge: Callable,
    *,
    what: str,
    hint: str,
    tries: int = 3,
    numbered: bool = False,
    undecided: str = "nothing these runs showed was wrong with the model, so run "
    "this again on a quieter machine to decide",
    say: Callable[[str], object] = print,
) -> Outcome:
    """Measure and judge; on a miss the machine may explain, say so and measure again.

    Args:
        measure: a function of no arguments returning a measurement, or of the
            try number (1 for the first) when ``numbered`` is True: a later try
            may measure differently (fit again, wait longer).
        judge: a function of a measurement returning ``(verdict, text)``, or a
            dict with ``status`` and ``text``; the verdict is one of
            :data:`VERDICTS` (True / False for pass / miss) and the text says in
            plain words what was measured against what.
        what: the claim being checked, for messages.
        hint: what to look at when the last try missed.
        tries: measurements at most, in [1, 10].
        numbered: pass the try number to ``measure``.
        undecided: what a reader should make of a run left undecided, said
            after the last ``"busy"`` try.
        say: where the plain-words lines go (``print``).

    Returns:
        The :class:`Outcome`: verdict ``"pass"``, or ``"busy"`` when the last
        try was too busy to decide.

    Raises:
        AssertionError: at once on ``"wrong"``; on ``"miss"`` at the last try,
            with every try's text, the load and the hint.
        ValueError: ``tries`` out of range, or a judge's verdict not allowed.
    """
    tries = check_int("tries", tries, 1, MAX_TRIES)
    for name, fn in (("measure", measure), ("judge", judge), ("say", say)):
        if not callable(fn):
            raise ValueError(f"{name}={fn!r} must be a function")
    texts: list[str] = []
    verdicts: list[str] = []
    for attempt in range(1, tries + 1):
        result = measure(attempt) if numbered else measure()
        judged = judge(result)
        verdict, text = _verdict_of(judged)
        texts.append(text)
        verdicts.append(verdict)
        where = f"try {attempt} of {tries}"
        if verdict == "pass":
            if attempt > 1:
                say(f"{where}: {text}: passed")
            return Outcome(verdict, result, text, attempt, judged)
        if verdict == "wrong":
            raise AssertionError(
                f"{what}: {text}. No busy machine explains this ({load_note()}), "
                "so measuring again cannot help"
            )
        if attempt == tries:
            break
        if verdict == "miss":
            say(
                f"{where}: {text}: outside the bound. The machine may have been "
                f"busy ({load_note()}); measuring again."
            )
        else:
            say(
                f"{where}: this machine was busy ({load_note()}): {text}; "
                "measuring again."
            )
    if verdict == "busy":
        say(
            f"undecided after {tries} tries: {text}. The machine stayed too busy "
            f"to tell ({load_note()}): {undecided}."
        )
        return Outcome(verdict, result, text, tries, judged)
    if all(v == "miss" for v in verdicts):
        how = "on its only try" if tries == 1 else f"on all {tries} tries"
    else:
        how = f"on the last of {tries} tries"
    raise AssertionError(
        f"{what}: missed {how} ({'; '.join(texts)}; now {load_note()}). A busy "
        f"machine slows a try, but rarely every one in the same direction: {hint}"
    )


def ratio_judge(measured: str, model: str, bounds):
    """A ``judge`` for :func:`retry`: measured / predicted within bounds.

    Args:
        measured: what was timed, e.g. "measured" (leads the sentence).
        model: the model's name, e.g. "ring model".
        bounds: ``(low, high)`` allowed for ``result["ratio"]``.

    Returns:
        ``judge(result) -> (verdict, text)`` for results with ``measured_s``,
        ``predicted_s`` and ``ratio``: ``"pass"`` inside the bounds, ``"miss"``
        outside.
    """
    low, high = bounds

    def judge(r):
        text = (
            f"{measured} {r['measured_s'] * 1e3:.2f} ms, {model} "
            f"{r['predicted_s'] * 1e3:.2f} ms, ratio {r['ratio']:.2f} "
            f"(allowed {low:g}-{high:g})"
        )
        return ("pass" if low < r["ratio"] < high else "miss"), text

    return judge


__all__ = ["MAX_TRIES", "VERDICTS", "Outcome", "load_note", "ratio_judge", "retry"]
