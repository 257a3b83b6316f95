"""Widget: pick stages, micro-batches and a schedule; see the Gantt chart."""

from __future__ import annotations

from clusterlab.core.validate import check_choice, check_int
from clusterlab.models.pipeline import (
    PIPELINE_SCHEDULES,
    bubble_fraction,
    peak_in_flight,
    simulate_schedule,
    simulated_bubble,
)
from clusterlab.pipeline.chart import MICROBATCHES, PIPELINE_STAGES, pipeline_gantt


def pipeline_schedule_widget(
    stages: int = 4, microbatches: int = 8, schedule: str = "1f1b", interleave: int = 1
):
    """Sliders for p, m and v and a schedule menu, over a simulated Gantt chart.

    Args:
        stages: initial p, in [2, 8].
        microbatches: initial m, in [1, 32].
        schedule: initial schedule, "1f1b" or "gpipe".
        interleave: initial chunks per GPU v, in [1, 4] (1F1B only).

    Returns:
        The widget (an ``ipywidgets.VBox``); ``.update()`` redraws it.
    """
    import ipywidgets as w
    from IPython.display import display

    check_int("stages", stages, PIPELINE_STAGES.min, PIPELINE_STAGES.max)
    check_int("microbatches", microbatches, MICROBATCHES.min, MICROBATCHES.max)
    check_choice("schedule", schedule, PIPELINE_SCHEDULES)
    check_int("interleave", interleave, 1, 4)
    p = PIPELINE_STAGES.widget(value=stages)
    m = MICROBATCHES.widget(value=microbatches)
    v = w.IntSlider(value=interleave, min=1, max=4, description="chunks v")
    sched = w.Dropdown(options=list(PIPELINE_SCHEDULES), value=schedule)
    sched.description = "schedule"
    status = w.HTML()
    out = w.Output()

    def update(_=None):
        out.clear_output(wait=True)
        if v.value > 1 and (sched.value != "1f1b" or m.value % p.value):
            status.value = "interleaving (v > 1) needs 1F1B and m a multiple of p"
            return
        df = simulate_schedule(p.value, m.value, sched.value, interleave=v.value)
        formula = bubble_fraction(p.value, m.value, sched.value, v.value)
        held = peak_in_flight(df).max()
        idle = simulated_bubble(df)
        status.value = (
            f"idle {idle:.1%} of the stages' time (formula "
            f"{formula:.1%}); most micro-batches held by one stage: {held:g}"
        )
        with out:
            display(
                pipeline_gantt(
                    df,
                    title=f"{sched.value}, p = {p.value}, m = {m.value}, v = {v.value}",
                    idle_fraction=idle,
                )
            )

    for control in (p, m, v, sched):
        control.observe(update, names="value")
    box = w.VBox([w.HBox([p, m]), w.HBox([v, sched]), status, out])
    box.update = update
    update()
    return box


__all__ = ["pipeline_schedule_widget"]
