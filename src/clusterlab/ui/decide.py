"""Widget: a workload's traits in, a recommendation and its reasons out."""

from __future__ import annotations

import html
import math
from dataclasses import replace

from ..models.decide import PRESETS, Hardware, Workload, recommend, reference_hardware

__all__ = ["decision_helper"]


def decision_helper(hw: Hardware | None = None, start: str = "LLM training (70B)"):
    """Controls for a workload's traits, starting from one of ``PRESETS``.

    Args:
        hw: the hardware and prices to compare (``cl.models.decide.Hardware``);
            default: ``cl.models.decide.reference_hardware()``.
        start: the preset shown first.

    Returns:
        An ``ipywidgets.VBox`` whose text updates with every change.
    """
    import ipywidgets as w

    hw = reference_hardware() if hw is None else hw
    if start not in PRESETS:
        raise ValueError(f"start={start!r} must be one of {list(PRESETS)}")
    wide = {"description_width": "170px"}
    preset = w.Dropdown(options=list(PRESETS), value=start, description="start from")
    log_i = w.FloatSlider(min=-3, max=4, step=0.1, description="log10 FLOP/byte")
    dense = w.FloatSlider(min=0, max=1, step=0.05, description="dense share")
    io = w.FloatSlider(min=0, max=1, step=0.05, description="I/O share")
    state = w.FloatLogSlider(min=0, max=13, step=0.1, description="state (bytes)")
    flags = {
        name: w.Checkbox(description=label)
        for name, label in (
            ("latency_bound", "many small requests"),
            ("branching", "complex branching"),
            ("strong_consistency", "strong consistency"),
        )
    }
    for c in (log_i, dense, io, state, preset):
        c.style = wide
    answer = w.HTML()

    def workload() -> Workload:
        return replace(
            PRESETS[preset.value],
            intensity=10**log_i.value,
            dense_fraction=dense.value,
            io_fraction=io.value,
            state_bytes=state.value,
            **{k: b.value for k, b in flags.items()},
        )

    def show_answer(_=None):
        r = recommend(workload(), hw)
        items = "".join(
            f"<li><b>{rule}</b> {html.escape(text)}</li>" for rule, text in r["reasons"]
        )
        answer.value = f"<h4>{html.escape(r['choice'])}</h4><ul>{items}</ul>"

    def load(_=None):
        p = PRESETS[preset.value]
        log_i.value = round(math.log10(p.intensity), 1)
        dense.value, io.value = p.dense_fraction, p.io_fraction
        state.value = max(p.state_bytes, 1.0)
        for k, box in flags.items():
            box.value = getattr(p, k)
        show_answer()

    preset.observe(load, names="value")
    for c in (log_i, dense, io, state, *flags.values()):
        c.observe(show_answer, names="value")
    load()
    return w.VBox(
        [preset, log_i, dense, io, state, w.HBox(list(flags.values())), answer]
    )
