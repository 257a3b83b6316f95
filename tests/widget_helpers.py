"""Reach a widget's controls by what the reader sees, not by their position.

Widget tests that index ``box.children[0].children[2]`` break whenever a layout
changes and can silently move the wrong control; these helpers walk the widget
tree and find a control by its description (or an output by its kind).
"""

from __future__ import annotations

import time

import ipywidgets as w


def walk(widget):
    """Every widget inside ``widget`` (itself included), depth first."""
    yield widget
    for child in getattr(widget, "children", ()):
        yield from walk(child)


def control(widget, description: str):
    """The one control whose description is, or starts with, ``description``."""
    found = [
        c
        for c in walk(widget)
        if isinstance(c, w.ValueWidget)
        and not isinstance(c, w.HTML | w.Label | w.HTMLMath)
        and (getattr(c, "description", "") or "").startswith(description)
    ]
    names = [
        getattr(c, "description", "")
        for c in walk(widget)
        if isinstance(c, w.ValueWidget)
    ]
    assert len(found) == 1, f"{len(found)} controls match {description!r}: {names}"
    return found[0]


def texts(widget):
    """The HTML and Label widgets inside ``widget`` (where widgets print results)."""
    return [c for c in walk(widget) if isinstance(c, w.HTML | w.Label | w.HTMLMath)]


def text(widget) -> str:
    """All the text the widget shows, joined."""
    return "\n".join(c.value for c in texts(widget))


def seconds(fn) -> float:
    """Wall-clock seconds ``fn()`` takes, for the speed tests.

    The speed tests are marked ``timing``: ``make test`` runs them alone, after
    every other test, so no other test worker stretches the time they measure.
    """
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start
