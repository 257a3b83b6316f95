"""Widget for scheduling: cluster size, workload and policy -> a Gantt chart."""

from __future__ import annotations

from clusterlab.control_plane.chart import schedule_chart
from clusterlab.control_plane.sim import (
    PLACEMENTS,
    POLICIES,
    SchedulerParams,
    random_jobs,
    simulate,
    summarize,
)


def scheduler_explorer(n_jobs: int = 12, seed: int = 0):
    """Widget: switches, GPUs per switch, jobs, policy, placement -> a schedule.

    Each change draws a fresh workload (``random_jobs``) for the cluster, runs
    it under the chosen policy and placement, and draws the Gantt chart with a
    line of totals.

    Returns:
        The widget (an ``ipywidgets.VBox``); ``widget.update()`` redraws it.
    """
    import ipywidgets as w
    from IPython.display import display

    switches = w.IntSlider(value=2, min=1, max=8, description="switches")
    per = w.IntSlider(value=8, min=2, max=16, step=2, description="GPUs/switch")
    jobs = w.IntSlider(value=n_jobs, min=2, max=30, description="jobs")
    policy = w.Dropdown(options=POLICIES, value="gang", description="policy")
    placement = w.Dropdown(options=PLACEMENTS, value="any", description="placement")
    status = w.HTML()
    out = w.Output()

    def update(_=None):
        p = SchedulerParams(switches.value, per.value, policy.value, placement.value)
        table = simulate(random_jobs(jobs.value, p.total_gpus, seed), p)
        s = summarize(table, p.total_gpus)
        status.value = (
            f"{p.total_gpus} GPUs: makespan {s['makespan_s']:.0f} s, mean wait "
            f"{s['mean_wait_s']:.0f} s, {s['deadlocked_jobs']} deadlocked, "
            f"{s['multi_switch_jobs']} jobs across switches"
        )
        chart = schedule_chart(table, title="The schedule")
        out.clear_output(wait=True)
        with out:
            display(chart)
        return chart

    for c in (switches, per, jobs, policy, placement):
        c.observe(update, names="value")
    box = w.VBox(
        [w.HBox([switches, per, jobs]), w.HBox([policy, placement]), status, out]
    )
    box.update = update
    update()
    return box


__all__ = ["scheduler_explorer"]
