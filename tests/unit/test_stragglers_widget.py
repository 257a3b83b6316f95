"""Every control of the straggler widget changes what it shows, or says why not.

The controls are reached by what the reader sees (``widget_helpers``); each is
moved from its default alone, and the widget's text (the step times at the
chosen N, and any note) must change. A control that cannot change anything at
the current settings must be disabled, with the reason in the text.
"""

import json

import ipywidgets as w
import pytest

import clusterlab as cl
import widget_helpers as wh


def other_value(control):
    """A value of ``control`` other than its current one."""
    if isinstance(control, w.Dropdown | w.SelectionSlider):
        options = [o[1] if isinstance(o, tuple) else o for o in control.options]
        return next(o for o in reversed(options) if o != control.value)
    if control.value < control.max:
        return min(control.max, control.value + max(control.step, 1))
    return control.min


def controls(box):
    return [
        c
        for c in wh.walk(box)
        if isinstance(c, w.ValueWidget)
        and not isinstance(c, w.HTML | w.Label | w.HTMLMath)
    ]


def test_every_control_changes_the_text_from_the_defaults():
    box = cl.stragglers.widget.straggler_explorer(n_steps=20)
    names = [c.description for c in controls(box)]
    assert len(names) == 7, names
    for name in names:
        fresh = cl.stragglers.widget.straggler_explorer(n_steps=20)
        control = wh.control(fresh, name)
        before = wh.text(fresh)
        assert not control.disabled, f"{name} is disabled at the defaults: {before}"
        control.value = other_value(control)
        assert wh.text(fresh) != before, f"moving {name} changed nothing"


@pytest.mark.parametrize(
    "setting, value, idle",
    [
        ("slow workers", 0, "× slower"),
        ("noise", "none", "cv"),
        ("mitigation", "none", "backups or H"),
    ],
)
def test_a_control_that_can_do_nothing_is_disabled_and_says_why(setting, value, idle):
    box = cl.stragglers.widget.straggler_explorer(n_steps=20)
    wh.control(box, setting).value = value
    control = wh.control(box, idle)
    assert control.disabled
    note = wh.text(box)
    assert f"{idle} does nothing now" in note
    # Moving it indeed changes no number (the note stays, the steps stay).
    control.value = other_value(control)
    assert wh.text(box) == note
    # Moving the setting back gives the control its effect again.
    wh.control(box, setting).value = {"slow workers": 1, "noise": "normal"}.get(
        setting, "local SGD"
    )
    assert not wh.control(box, idle).disabled


def test_sweep_chart_stays_under_50_kb_as_vega_lite_and_as_vega():
    from clusterlab.core.theme import vega_spec

    sweep = cl.models.stragglers.step_time_sweep()
    spec = cl.stragglers.chart.straggler_sweep_chart(sweep).to_dict()
    assert len(json.dumps(spec)) < 50_000
    assert len(json.dumps(vega_spec(spec))) < 50_000
    (csv,) = spec["datasets"].values()
    # Every scenario and N is there: one CSV row each, plus the header.
    assert len(csv.strip().splitlines()) == len(sweep) // 3 + 1
