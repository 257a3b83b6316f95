"""Widget: a slow rank among N jittery ones, and whether the rule finds it.

Only wiring: the controls call ``cl.debugging.timings`` (simulated
per-rank times and the outlier rule) and hand the result to
``cl.debugging.chart.step_times_chart``.
"""

from __future__ import annotations

import html

import numpy as np

from clusterlab.core.validate import check_int
from clusterlab.debugging.chart import step_times_chart
from clusterlab.debugging.timings import (
    OUTLIER_RATIO,
    simulated_step_timings,
    slow_ranks,
    straggler_verdict,
)


def slow_rank_view(settings: dict, seed: int = 0):
    """The chart and the one-line verdict for one setting of the controls.

    Args:
        settings: ``world_size``, ``slow_factor``, ``cv``, ``ratio``, ``steps``.
        seed: seeds the draws.

    Returns:
        ``(chart, verdict_text)``.
    """
    n = settings["world_size"]
    timings = simulated_step_timings(
        n,
        slow_rank=n // 3,
        slow_factor=settings["slow_factor"],
        cv=settings["cv"],
        steps=settings["steps"],
        seed=seed,
    )
    ratio = settings["ratio"]
    flagged = slow_ranks(timings, ratio=ratio)
    medians = timings.groupby("rank")["compute_s"].median()
    threshold_s = ratio * float(np.median(medians))
    verdict = straggler_verdict(timings)
    text = (
        f"rank {n // 3} is {settings['slow_factor']:.2f}x slower; the rule "
        f"(median > {ratio:.2f} x the median rank) flags {flagged or 'no rank'}; "
        f"step {verdict['measured_step_s'] * 1e3:.1f} ms, jitter alone "
        f"{verdict['jitter_only_s'] * 1e3:.1f} ms (model)"
    )
    return step_times_chart(timings, flagged, threshold_s), text


def slow_rank_explorer(seed: int = 0):
    """The live widget: ranks, slowdown, jitter and the rule's ratio.

    Returns:
        An ``ipywidgets.VBox``.
    """
    import ipywidgets as w

    from clusterlab.stragglers.widget import _display_unvalidated

    check_int("seed", seed, 0)
    n = w.IntSlider(value=16, min=4, max=64, description="ranks")
    factor = w.FloatSlider(
        value=1.3, min=1.0, max=3.0, step=0.05, description="× slower"
    )
    cv = w.FloatSlider(value=0.1, min=0.0, max=0.5, step=0.01, description="jitter cv")
    ratio = w.FloatSlider(
        value=OUTLIER_RATIO, min=1.05, max=3.0, step=0.05, description="rule ratio"
    )
    steps = w.IntSlider(value=20, min=3, max=100, description="steps")
    verdict, out = w.HTML(), w.Output()

    def update(_=None):
        settings = dict(
            world_size=n.value,
            slow_factor=factor.value,
            cv=cv.value,
            ratio=ratio.value,
            steps=steps.value,
        )
        try:
            chart, text = slow_rank_view(settings, seed)
        except ValueError as exc:
            verdict.value = f"<b>not allowed:</b> {html.escape(str(exc))}"
            return
        verdict.value = html.escape(text)
        out.clear_output(wait=True)
        with out:
            _display_unvalidated(chart)

    for control in (n, factor, cv, ratio, steps):
        control.observe(update, names="value")
    update()
    return w.VBox(
        [w.HBox([w.VBox([n, factor, cv]), w.VBox([ratio, steps])]), verdict, out]
    )


__all__ = ["slow_rank_explorer", "slow_rank_view"]
