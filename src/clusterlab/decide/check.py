"""Checks of the choosing lab: the exercise, and the measured verdicts.

``verdicts_match_table`` decides every workload of the source's table from
traits measured by running its kernel
(``cl.roofline.workloads.measure_traits``) and fails when a verdict differs
from the table's; ``consistency_flag_decides`` finds where the stated "strong
consistency" alone would change a verdict.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from clusterlab.core.busy import retry
from clusterlab.core.checks import TICK, not_attempted, passed
from clusterlab.models.decide import decision_table, measured_workloads, recommend

# (speedup, GPU $/h, CPU $/h, answer, what a wrong answer usually means)
CASES = [
    (100.0, 2.5, 0.05, True, ""),
    (10.0, 2.5, 0.05, False, "the GPU is faster, but is it 50x faster?"),
    (50.0, 2.5, 0.05, False, "at exactly 50x both cost the same: not cheaper"),
    (1.0, 0.04, 0.05, True, "a GPU no faster but cheaper per hour still wins"),
]


def cheaper_on_gpu(fn) -> bool:
    """Check ``fn(speedup, gpu_price, cpu_price) -> bool`` on hand-worked cases."""
    name = "cheaper_on_gpu"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function {name}")
    for speedup, gpu, cpu, want, hint in CASES:
        try:
            got = fn(speedup, gpu, cpu)
        except NotImplementedError:
            return not_attempted(name)
        if bool(got) is not want:
            raise AssertionError(
                f"{name}({speedup}, {gpu}, {cpu}) returned {got!r}, expected {want}: "
                f"{hint or 'compare gpu_price / speedup with cpu_price'}"
            )
    return passed(name, f"right on {len(CASES)} hand-worked cases")


#: The source's answers: its workload table (W1), its examples of a key-value
#: store (W4) and a crawler (F3), and D3's mixed pipeline.
SOURCE_TABLE = {
    "LLM training (70B)": "GPU cluster",
    "batch inference (70B)": "GPU cluster",
    "preprocessing + training": "both",
    "web serving": "distributed CPU",
    "data preprocessing": "distributed CPU",
    "real-time analytics": "distributed CPU",
    "key-value store (Redis)": "distributed CPU",
    "web crawler": "distributed CPU",
}


def _disagreements(traits, hw) -> tuple[pd.DataFrame, dict]:
    workloads = measured_workloads(traits)
    table = decision_table(workloads.values(), hw)
    choice = table[table["line"] == 0].set_index("workload")["choice"]
    wrong = {
        name: (choice[name], want)
        for name, want in SOURCE_TABLE.items()
        if name in choice.index and choice[name] != want
    }
    return table, wrong


def verdicts_match_table(
    traits: pd.DataFrame, hw, measure_again=None, tries: int = 3
) -> pd.DataFrame:
    """Decide every workload from measured traits; compare with the source's table.

    Args:
        traits: ``cl.roofline.workloads.measure_traits()``'s result.
        hw: the hardware and prices (``cl.models.decide.Hardware``).
        measure_again: a function returning fresh traits (such as
            ``cl.roofline.workloads.measure_traits``), called when a verdict
            differs, since a busy machine skews timings; None judges ``traits`` alone.
        tries: measurements at most, the first included, in [1, 10].

    Returns:
        The ``decision_table`` of the last traits judged, those traits in
        ``attrs["traits"]``.

    Raises:
        AssertionError: naming each workload whose measured verdict differs
            from the table's, with both answers, on the last try.
    """
    if not isinstance(traits, pd.DataFrame):
        raise ValueError(f"traits={traits!r} must be a DataFrame of measured traits")
    if measure_again is None:
        tries = 1
    elif not callable(measure_again):
        raise ValueError(f"measure_again={measure_again!r} must be a function")
    given = traits

    def measure(attempt):
        return given if attempt == 1 else measure_again()

    def judge(t):
        wrong = _disagreements(t, hw)[1]
        if not wrong:
            return "pass", f"all {len(SOURCE_TABLE)} verdicts agree with the table"
        lines = "; ".join(
            f"{k}: measured {g}, table {w}" for k, (g, w) in wrong.items()
        )
        return "miss", f"the measured traits disagree with the table: {lines}"

    traits = retry(
        measure,
        judge,
        what="the workload kernels' verdicts",
        hint="a kernel whose measured traits stay on the wrong side of a "
        "threshold on every try is measured wrong, or the rule is",
        tries=tries,
        numbered=True,
    ).result
    table = _disagreements(traits, hw)[0]
    table.attrs["traits"] = traits
    print(
        f"{TICK} the measured traits give the source's answer on all "
        f"{len(SOURCE_TABLE)} workloads"
    )
    return table


def consistency_flag_decides(workloads: dict, hw) -> dict:
    """Where saying "strong consistency" changes a verdict the traits give.

    Args:
        workloads: name -> ``Workload`` (measured ones).
        hw: the hardware and prices.

    Returns:
        Name -> ``(choice with the flag, choice without)`` for each workload
        that states strong consistency and whose choice the flag changes.
    """
    out = {}
    for name, w in workloads.items():
        if w.strong_consistency:
            with_flag = recommend(w, hw)["choice"]
            without = recommend(replace(w, strong_consistency=False), hw)["choice"]
            if with_flag != without:
                out[name] = (with_flag, without)
    return out


__all__ = [
    "SOURCE_TABLE",
    "cheaper_on_gpu",
    "consistency_flag_decides",
    "verdicts_match_table",
]
