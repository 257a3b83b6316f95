"""Move every control of a widget in a kernel and see what the reader would see.

This module runs inside a Jupyter kernel (``tests/test_widget_controls.py``
starts one with nbclient). A widget's charts reach the front end as display
messages sent while its ``Output`` is active; the probe records every message
the kernel publishes, so a redrawn chart is seen as the front end would see it,
and the text of its ``HTML`` and ``Label`` children is read directly.

For each control, with every other control at its default, the probe sets a
value other than the default (the far end of a slider, another menu entry, the
other state of a check box, a click for a button) and reports whether the
chart or the text changed. A control that changes neither must have made the
widget say why in its text, and that shows as a change of text too.
"""

from __future__ import annotations

import json

import ipywidgets as w

TEXT_TYPES = (w.HTML, w.HTMLMath, w.Label)


def walk(widget):
    """Every widget inside ``widget`` (itself included), depth first."""
    yield widget
    for child in getattr(widget, "children", ()):
        yield from walk(child)


def controls(widget) -> list:
    """The controls a reader can move: value widgets and buttons, not text."""
    found = []
    for c in walk(widget):
        if isinstance(c, w.Button) or (
            isinstance(c, w.ValueWidget) and not isinstance(c, TEXT_TYPES)
        ):
            if not getattr(c, "disabled", False):
                found.append(c)
    return found


def label(control) -> str:
    return (
        getattr(control, "description", "") or getattr(control, "tooltip", "") or ""
    ) or type(control).__name__


class Recorder:
    """Every display message the kernel publishes, as JSON text."""

    def __init__(self):
        from IPython import get_ipython

        self.pub = get_ipython().display_pub
        self.original = self.pub.publish
        self.seen: list[str] = []

    def __enter__(self):
        def publish(data, metadata=None, *args, **kwargs):
            self.seen.append(json.dumps(data, sort_keys=True, default=str))
            return self.original(data, metadata, *args, **kwargs)

        self.pub.publish = publish
        return self

    def __exit__(self, *exc):
        self.pub.publish = self.original


def other_value(control):
    """A value other than the control's current one (None: nothing to try)."""
    value = control.value
    if isinstance(control, w.Checkbox | w.ToggleButton):
        return not value
    options = getattr(control, "options", None)
    if options is not None and not isinstance(control, w.SelectionRangeSlider):
        labels = [o[1] if isinstance(o, tuple) else o for o in options]
        for candidate in reversed(labels):
            if candidate != value:
                return candidate
        return None
    low, high = getattr(control, "min", None), getattr(control, "max", None)
    if isinstance(value, tuple) and low is not None:  # a range slider
        return (low, high) if value != (low, high) else (low, low)
    if low is not None and high is not None:
        return high if value != high else low
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):  # a number box with no bounds
        return value * 2 if value else 1
    if isinstance(value, str):
        return value + "0"
    return None


def probe(make) -> list[dict]:
    """For each control of ``make()``: moved how, and did the output change?

    The widget is built once; each control is moved from its default, the
    output compared, and the control put back to its default before the next.
    """
    results = []
    with Recorder() as rec:
        widget = make()
        for control in controls(widget):
            name = label(control)
            default = None if isinstance(control, w.Button) else control.value
            before_text = _texts(widget)
            before_charts = set(rec.seen)
            start = len(rec.seen)
            if isinstance(control, w.Button):
                control.click()
                moved = "clicked"
            else:
                new = other_value(control)
                if new is None:
                    results.append({"control": name, "moved": None, "changed": False})
                    continue
                control.value = new
                moved = repr(new)
            text_changed = _texts(widget) != before_text
            # A redraw that publishes only charts already shown is no change.
            chart_changed = any(c not in before_charts for c in rec.seen[start:])
            results.append(
                {
                    "control": name,
                    "moved": moved,
                    "changed": chart_changed or text_changed,
                    "text_changed": text_changed,
                    "chart_changed": chart_changed,
                }
            )
            if default is not None:
                control.value = default
    return results


def _texts(widget) -> list[str]:
    return [t.value for t in walk(widget) if isinstance(t, TEXT_TYPES)]
