"""Widget: a workload's traits in, a recommendation and its reasons out."""

from __future__ import annotations

import html
import math
from dataclasses import replace

from clusterlab.models.decide import (
    PRESETS,
    Hardware,
    Workload,
    recommend,
    reference_hardware,
)

_WIDE = "560px"  # room for a slider's track and the longest workload name


_LABEL = {"description_width": "200px"}


def decision_helper(
    hw: Hardware | None = None,
    start: str = "LLM training (70B)",
    workloads: dict | None = None,
):
    """Controls for a workload's traits, starting from a measured or stated one.

    Every control changes the text: the choice, its reasons, and the numbers
    behind them (kernel and job speedup, cost ratio, GPUs to hold the state).

    Args:
        hw: the hardware and prices to compare (``cl.models.decide.Hardware``);
            default: ``cl.models.decide.reference_hardware()``.
        start: the workload shown first.
        workloads: name -> ``Workload`` to start from, e.g.
            ``cl.models.decide.measured_workloads(traits)``; default: the
            stated ``PRESETS``.

    Returns:
        An ``ipywidgets.VBox`` whose text updates with every change.
    """
    import ipywidgets as w

    hw = reference_hardware() if hw is None else hw
    workloads = PRESETS if workloads is None else dict(workloads)
    if start not in workloads:
        raise ValueError(f"start={start!r} must be one of {list(workloads)}")

    def slider(kind, description, **kw):
        return kind(
            description=description,
            layout=w.Layout(width=_WIDE),
            style=_LABEL,
            continuous_update=False,
            **kw,
        )

    preset = w.Dropdown(
        options=list(workloads),
        value=start,
        description="start from",
        layout=w.Layout(width=_WIDE),
        style=_LABEL,
    )
    log_i = slider(w.FloatSlider, "log10 FLOP/byte", min=-6, max=4, step=0.1)
    dense = slider(w.FloatSlider, "dense share of compute", min=0, max=1, step=0.01)
    io = slider(w.FloatSlider, "I/O share of time", min=0, max=1, step=0.01)
    branch = slider(w.FloatSlider, "branchy share of the rest", min=0, max=1, step=0.01)
    state = slider(w.FloatLogSlider, "state to hold (bytes)", min=0, max=13, step=0.1)
    flags = {
        name: w.Checkbox(
            description=label,
            indent=False,
            layout=w.Layout(width="270px"),
            style={"description_width": "initial"},
        )
        for name, label in (
            ("latency_bound", "many small requests"),
            ("strong_consistency", "strong consistency"),
        )
    }
    answer = w.HTML()

    def workload() -> Workload:
        return replace(
            workloads[preset.value],
            intensity=10**log_i.value,
            dense_fraction=dense.value,
            io_fraction=io.value,
            branch_fraction=branch.value,
            branching=branch.value >= 0.5,
            state_bytes=state.value,
            **{k: b.value for k, b in flags.items()},
        )

    def show_answer(_=None):
        r = recommend(workload(), hw)
        n = r["numbers"]
        items = "".join(
            f"<li><b>{rule}</b> {html.escape(text)}</li>" for rule, text in r["reasons"]
        )
        ridge_gpu = hw.gpu_peak_flops / hw.gpu_bandwidth_Bps
        ridge_cpu = hw.cpu_peak_flops / hw.cpu_bandwidth_Bps
        answer.value = (
            f"<h4>{html.escape(r['choice'])}</h4><ul>{items}</ul>"
            f"<p>at {10**log_i.value:.3g} FLOP/byte (ridge points: GPU "
            f"{ridge_gpu:.0f}, core {ridge_cpu:.0f}) the dense kernel runs "
            f"{n['kernel_speedup']:,.0f}x faster on the GPU; the whole job "
            f"{n['job_speedup']:,.2f}x; GPU cost per unit of work "
            f"{n['cost_ratio']:.3f}x the CPU's; {state.value:.3g} bytes of state "
            f"need {n['gpus_to_hold_state']} GPU(s)</p>"
        )

    def load(_=None):
        p = workloads[preset.value]
        log_i.value = round(math.log10(p.intensity), 1)
        dense.value, io.value = p.dense_fraction, p.io_fraction
        share = p.branch_fraction
        branch.value = float(p.branching) if share is None else share
        state.value = max(p.state_bytes, 1.0)
        for k, box in flags.items():
            box.value = getattr(p, k)
        show_answer()

    preset.observe(load, names="value")
    for c in (log_i, dense, io, branch, state, *flags.values()):
        c.observe(show_answer, names="value")
    load()
    return w.VBox(
        [preset, log_i, dense, io, branch, state, w.HBox(list(flags.values())), answer]
    )


__all__ = ["decision_helper"]
