"""The control spec builds the live widget and the page's Vega parameter alike.

``cl.core.controls.Range`` and ``Choice`` hold one explorer parameter; these
tests build each kind of widget and each kind of binding from one spec, and
feed every validation a wrong value.
"""

from __future__ import annotations

import subprocess
import sys

import altair as alt
import ipywidgets as w
import pytest

from clusterlab.core.controls import Choice, Range


def bind_of(param) -> dict:
    """The ``bind`` of one ``alt.param``, as it goes into the spec."""
    return param.param.to_dict()["bind"]


# ------------------------------------------------------------------- Range
def test_an_int_range_builds_an_int_slider_and_a_range_binding():
    spec = Range("p", min=2, max=8, step=2, default=4, label="stages p ")
    slider = spec.widget()
    assert isinstance(slider, w.IntSlider)
    assert (slider.min, slider.max, slider.step, slider.value) == (2, 8, 2, 4)
    assert slider.description == "stages p"
    param = spec.param()
    assert param.name == "p" and param.param.value == 4
    assert bind_of(param) == {
        "input": "range", "min": 2, "max": 8, "step": 2, "name": "stages p ",
    }  # fmt: skip


def test_a_float_range_builds_a_float_slider_with_its_own_label():
    spec = Range(
        "kwh", min=0.03, max=0.4, step=0.005, default=0.08,
        label="$ per kWh ", widget_label="kWh price",
    )  # fmt: skip
    slider = spec.widget(value=0.1, continuous_update=False)
    assert isinstance(slider, w.FloatSlider)
    assert slider.description == "kWh price" and slider.value == 0.1
    assert not slider.continuous_update
    assert spec.param(value=0.2).param.value == 0.2
    assert bind_of(spec.param())["step"] == 0.005


def test_a_log_range_moves_the_exponent_in_the_page_and_the_value_live():
    spec = Range(
        "log_drift", min=0.0, max=2.0, step=0.25, default=1.0,
        label="log10 drift (ppm) ", widget_label="largest drift (ppm)", log_base=10,
    )  # fmt: skip
    slider = spec.widget()
    assert isinstance(slider, w.FloatLogSlider)
    assert (slider.base, slider.min, slider.max, slider.step) == (10, 0, 2, 0.25)
    assert slider.value == pytest.approx(10.0)
    assert spec.widget(value=31.6).value == pytest.approx(31.6)
    assert bind_of(spec.param()) == {
        "input": "range", "min": 0.0, "max": 2.0, "step": 0.25,
        "name": "log10 drift (ppm) ",
    }  # fmt: skip
    with pytest.raises(ValueError, match=r"value=1000.0 must be in \[1, 100\]"):
        spec.widget(value=1000.0)
    with pytest.raises(ValueError, match=r"value=0 must be in \[1, 100\]"):
        spec.widget(value=0)


def test_numpy_numbers_are_numbers():
    import numpy as np

    spec = Range("n", min=2, max=64, step=1, default=8, label="n ")
    param = spec.param(value=np.int64(4))
    assert type(param.param.value) is int
    assert (
        alt.Chart().mark_point().add_params(param).to_dict()["params"][0]["value"] == 4
    )
    assert spec.widget(value=np.float64(5.0)).value == 5
    cut = spec.within(np.int64(4), np.int64(16))
    assert cut.max == 16 and type(cut.max) is int


def test_clamp_and_up_to():
    spec = Range("n", min=2, max=64, step=1, default=8, label="n ")
    assert (spec.clamp(1), spec.clamp(100), spec.clamp(5)) == (2, 64, 5)
    short = spec.up_to(4)
    assert (short.max, short.default, short.min) == (4, 4, 2)
    assert spec.up_to(32).default == 8
    with pytest.raises(ValueError, match=r"max=100 must be in \[2, 64\]"):
        spec.up_to(100)
    with pytest.raises(ValueError, match="value=nan"):
        spec.clamp(float("nan"))


def test_within_cuts_a_range_to_a_sweep_on_its_grid():
    spec = Range("jitter_ms", min=0, max=500, step=10, default=100, label="j ")
    cut = spec.within(50, 300, 50)
    assert (cut.min, cut.max, cut.step, cut.default) == (50, 300, 50, 100)
    assert bind_of(cut.param(value=150))["max"] == 300
    assert spec.within(200, 300).default == 200  # moved inside the cut
    assert spec.within(0, 20).step == 10
    cases = [
        ((-10, 300), r"lo=-10 must be in \[0, 500\]"),
        ((0, 510), r"hi=510 must be in \[0, 500\]"),
        ((5, 300), r"lo=5 must lie on the live slider's grid 0 \+ k \* 10"),
        ((300, 300), "hi=300 must be above lo=300"),
        ((0, 300, 15), "step=15 must be a multiple of 10"),
        ((0, 300, 0), "step=0 must be a multiple of 10"),
        ((0, 290, 20), "step=20 must divide max - min = 290"),
    ]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            spec.within(*args)
    logs = Range(
        "ld", min=0.0, max=2.0, step=0.25, default=1.0, label="d ", log_base=10
    )
    cut = logs.within(0.0, 2.0, 0.5)  # a sweep of 1, 3.16, 10, 31.6, 100 ppm
    assert (cut.step, cut.log_base) == (0.5, 10)
    assert logs.clamp(1000.0) == 100.0 and logs.clamp(0.5) == 1.0


def test_points_give_a_radio_of_a_sweep_s_cases_of_the_live_slider():
    cv = Range("cv", min=0.0, max=1.0, step=0.01, default=0.1, label="cv ")
    radio = cv.points([0.4, 0.02, 0.1, 0.02])
    assert isinstance(radio, Choice)
    assert (radio.name, radio.options, radio.default) == ("cv", (0.02, 0.1, 0.4), 0.1)
    assert bind_of(radio.param()) == {
        "input": "radio", "options": [0.02, 0.1, 0.4], "name": "cv ",
    }  # fmt: skip
    scale = Range(
        "scale", min=0.0, max=3.0, step=0.25, default=0.0, label="× ", log_base=10
    )
    assert scale.points([100.0, 1.0, 10.0]).options == (1.0, 10.0, 100.0)
    assert scale.points([100.0, 10.0]).default == 10.0  # nearest 10 ** 0
    for bad, message in [
        ([0.005], r"values hold 0.005, not a point of the live slider 0.0 \+ k"),
        ([1.5], "values hold 1.5, not a point"),
        (["a"], "values hold 'a', not a number"),
        ([], r"values=\[\] must hold one value or more"),
    ]:
        with pytest.raises(ValueError, match=message):
            cv.points(bad)
    with pytest.raises(ValueError, match=r"values hold 5.0, not a point.*\(log 10\)"):
        scale.points([5.0])
    with pytest.raises(ValueError, match="values hold 0, not a number"):
        scale.points([0])


def test_a_range_rejects_what_its_sliders_cannot_show():
    ok = dict(name="x", min=0, max=10, step=1, default=5, label="x ")
    cases = [
        (dict(default=11), r"default=11 must be in \[0, 10\]"),
        (dict(default=-1), r"default=-1 must be in \[0, 10\]"),
        (dict(min=10, max=10), "max=10 must be above min=10"),
        (dict(min=10, max=0), "max=0 must be above min=10"),
        (dict(step=0), "step=0 must be > 0"),
        (dict(step=-1), "step=-1 must be > 0"),
        (dict(step=3), "step=3 must divide max - min = 10"),
        (dict(name="2x"), "name='2x' must be a Vega parameter name"),
        (dict(name="log a"), "name='log a' must be a Vega parameter name"),
        (dict(label=" "), "label=' ' must be a non-empty string"),
        (dict(widget_label=""), "widget_label='' must be a non-empty string"),
        (dict(min="0"), "min='0' must be a finite number"),
        (dict(default=float("inf")), "default=inf must be a finite number"),
        (dict(log_base=1), "log_base=1 must be a number > 1"),
    ]
    for change, message in cases:
        with pytest.raises(ValueError, match=message):
            Range(**{**ok, **change})
    spec = Range(**ok)
    with pytest.raises(ValueError, match=r"value=12 must be in \[0, 10\]"):
        spec.param(value=12)
    with pytest.raises(ValueError, match=r"value=-3 must be in \[0, 10\]"):
        spec.widget(value=-3)
    # float steps that divide the range up to rounding are accepted
    Range("c", min=1.0, max=8.0, step=0.05, default=2.0, label="c ")
    Range("k", min=0.03, max=0.4, step=0.005, default=0.1, label="k ")


# ------------------------------------------------------------------ Choice
@pytest.mark.parametrize(
    "kind, cls",
    [
        ("dropdown", w.Dropdown),
        ("toggle", w.ToggleButtons),
        ("radio", w.RadioButtons),
        ("slider", w.SelectionSlider),
    ],
)
def test_a_choice_builds_each_kind_of_widget(kind, cls):
    spec = Choice(
        "sched", options=("GPipe", "1F1B"), default="1F1B",
        label="schedule ", widget_kind=kind,
    )  # fmt: skip
    control = spec.widget()
    assert isinstance(control, cls)
    assert list(control.options) == ["GPipe", "1F1B"] and control.value == "1F1B"
    assert control.description == "schedule"


def test_a_choice_builds_a_radio_or_a_select_binding_with_labels():
    spec = Choice(
        "time_axis", options=["true", "wall"], default="true",
        labels=["true time", "each process's own clock"], label="time axis ",
    )  # fmt: skip
    assert spec.options == ("true", "wall")
    assert bind_of(spec.param()) == {
        "input": "radio", "options": ["true", "wall"],
        "labels": ["true time", "each process's own clock"], "name": "time axis ",
    }  # fmt: skip
    live = spec.widget(value="wall")
    assert live.value == "wall" and live.label == "each process's own clock"
    menu = Choice("m", options=(1, 2, 4), default=2, label="m ", binding_kind="select")
    assert bind_of(menu.param(value=4)) == {
        "input": "select", "options": [1, 2, 4], "name": "m ",
    }  # fmt: skip
    selection = alt.selection_point(fields=["m"], value=2, bind=menu.binding())
    assert selection.param.to_dict()["bind"]["input"] == "select"


def test_among_cuts_a_choice_to_a_sweep_in_its_own_order():
    spec = Choice(
        "m", options=("7B", "13B", "70B"), default="7B", label="model ",
        labels=("small", "medium", "large"),
    )  # fmt: skip
    cut = spec.among(["70B", "13B", "70B"])
    assert (cut.options, cut.labels, cut.default) == (
        ("13B", "70B"), ("medium", "large"), "70B",
    )  # fmt: skip
    assert spec.among(["7B"]).default == "7B"
    with pytest.raises(ValueError, match=r"not options: \['175B'\]"):
        spec.among(["7B", "175B"])
    with pytest.raises(ValueError, match=r"values=\[\] must be one or more of"):
        spec.among([])


def test_a_choice_rejects_what_its_controls_cannot_show():
    ok = dict(name="x", options=("a", "b"), default="a", label="x ")
    cases = [
        (dict(options=()), r"options=\(\) must hold one value or more"),
        (dict(options="ab"), "options='ab' must be a sequence of values"),
        (dict(options=("a", "a")), "repeat a value"),
        (dict(default="c"), r"default='c' must be one of \['a', 'b'\]"),
        (dict(labels=("A",)), "must give one label per option"),
        (dict(widget_kind="slider2"), "widget_kind='slider2' must be one of"),
        (dict(binding_kind="checkbox"), "binding_kind='checkbox' must be one of"),
        (dict(name=""), "name='' must be a Vega parameter name"),
        (dict(label=""), "label='' must be a non-empty string"),
    ]
    for change, message in cases:
        with pytest.raises(ValueError, match=message):
            Choice(**{**ok, **change})
    spec = Choice(**ok)
    with pytest.raises(ValueError, match=r"value='z' must be one of \['a', 'b'\]"):
        spec.param(value="z")
    with pytest.raises(ValueError, match=r"value='z' must be one of \['a', 'b'\]"):
        spec.widget(value="z")


def test_specs_are_frozen():
    spec = Range("x", min=0, max=1, step=1, default=0, label="x ")
    with pytest.raises(AttributeError):
        spec.max = 2


def test_the_spec_loads_no_widget_library():
    code = (
        "import sys, clusterlab as cl; from clusterlab.core.controls import Range;"
        "Range('x', min=0, max=1, step=1, default=0, label='x ').param();"
        "print('ipywidgets' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"
