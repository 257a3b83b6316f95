"""One spec per explorer control: it builds the live slider and the page's slider.

An explorer shows a parameter twice: as an ipywidget in a kernel and as a
Vega-Lite parameter bound to an input in the static twin on the book's page.
A :class:`Range` or a :class:`Choice` holds the parameter once (its Vega name,
range or options, default and labels) and builds both, so the two cannot drift::

    STAGES = Range("p", min=2, max=8, step=1, default=4, label="stages p ")
    slider = STAGES.widget()  # ipywidgets.IntSlider(min=2, max=8, value=4)
    param = STAGES.param()  # alt.param(name="p", bind=alt.binding_range(...))

A spec whose ``min``, ``max`` and ``step`` are all ``int`` builds an
``IntSlider``; otherwise a ``FloatSlider``. With ``log_base`` the spec's range
is of exponents: the twin's slider moves the exponent (its expressions use
``pow(base, name)``) and the widget is a ``FloatLogSlider`` whose value is
``base ** exponent``, so one spec serves both scales.

ipywidgets is imported only when a widget is built: ``import clusterlab`` and
the book's static pages never load it.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass, replace
from typing import Any

_VEGA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

WIDGET_KINDS = ("dropdown", "toggle", "radio", "slider")
"""How a :class:`Choice` shows in a kernel: ``Dropdown``, ``ToggleButtons``,
``RadioButtons`` or ``SelectionSlider``."""

BINDINGS = ("radio", "select")
"""How a :class:`Choice` shows in the page: ``binding_radio`` or ``binding_select``."""


def _check_name(name) -> None:
    if not isinstance(name, str) or not _VEGA_NAME.match(name):
        raise ValueError(
            f"name={name!r} must be a Vega parameter name: a letter or _ "
            "then letters, digits or _"
        )


def _check_label(field_name: str, label) -> None:
    if not isinstance(label, str) or not label.strip():
        raise ValueError(f"{field_name}={label!r} must be a non-empty string")


def _whole(x: float) -> bool:
    """True when ``x`` is a whole number, up to float rounding."""
    return abs(x - round(x)) <= 1e-9 * max(1.0, abs(x))


def _plain(v):
    """A NumPy scalar as the Python number it holds (a spec's JSON needs one)."""
    return v.item() if isinstance(v, numbers.Real) and hasattr(v, "item") else v


def _is_number(v) -> bool:
    """A finite real number (NumPy's too), not a bool."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


@dataclass(frozen=True)
class Range:
    """A number on a slider: ``min`` to ``max`` in steps of ``step``.

    Args:
        name: the Vega parameter's name (the twin's expressions read it).
        min, max: the ends of the slider; ``min < max``.
        step: the slider's step (> 0); it divides ``max - min``, so both ends
            can be reached.
        default: where both sliders start unless told otherwise, in the range.
        label: the page slider's label (Vega shows it before the input).
        widget_label: the live slider's description (default: ``label``).
        log_base: if set (> 1), ``min``, ``max``, ``step`` and ``default`` are
            exponents of this base; the live slider is a ``FloatLogSlider``.
    """

    name: str
    min: float
    max: float
    step: float
    default: float
    label: str
    widget_label: str | None = None
    log_base: float | None = None

    def __post_init__(self):
        _check_name(self.name)
        for f in ("min", "max", "step", "default"):
            if not _is_number(getattr(self, f)):
                raise ValueError(
                    f"{f}={getattr(self, f)!r} must be a finite number "
                    f"(control {self.name!r})"
                )
        if not self.min < self.max:
            raise ValueError(
                f"max={self.max!r} must be above min={self.min!r} "
                f"(control {self.name!r})"
            )
        if not self.step > 0:
            raise ValueError(f"step={self.step!r} must be > 0 (control {self.name!r})")
        if not _whole((self.max - self.min) / self.step):
            raise ValueError(
                f"step={self.step!r} must divide max - min = {self.max - self.min!r}"
                f" (control {self.name!r}), or the slider cannot reach max"
            )
        self._check_value("default", self.default)
        _check_label("label", self.label)
        if self.widget_label is not None:
            _check_label("widget_label", self.widget_label)
        if self.log_base is not None and not (
            _is_number(self.log_base) and self.log_base > 1
        ):
            raise ValueError(
                f"log_base={self.log_base!r} must be a number > 1 "
                f"(control {self.name!r})"
            )

    def _check_value(self, field_name: str, value) -> None:
        if not _is_number(value) or not self.min <= value <= self.max:
            raise ValueError(
                f"{field_name}={value!r} must be in [{self.min!r}, {self.max!r}]"
                f" (control {self.name!r})"
            )

    @property
    def integer(self) -> bool:
        """True when ``min``, ``max`` and ``step`` are ints: an ``IntSlider``."""
        return all(
            isinstance(v, int) and not isinstance(v, bool)
            for v in (self.min, self.max, self.step)
        )

    def clamp(self, value):
        """``value`` moved into ``[min, max]``, as a slider shows a value beyond it.

        For starting values that come from data (a fitted latency, a job's
        size): the slider starts at the nearest end instead of failing. The
        value is in the live slider's scale: with ``log_base``, the ends are
        ``base ** min`` and ``base ** max``.
        """
        if not _is_number(value):
            raise ValueError(f"value={value!r} must be a finite number ({self.name!r})")
        if self.log_base is not None:
            lo, hi = self.log_base**self.min, self.log_base**self.max
            return min(max(value, lo), hi)
        return min(max(value, self.min), self.max)

    def up_to(self, max) -> Range:  # noqa: A002 - the field's own name
        """This spec with a lower ``max`` (a twin that carries fewer sweeps).

        The default moves down to ``max`` if it lay above it.
        """
        self._check_value("max", max)
        return replace(self, max=max, default=min(self.default, max))

    def within(self, lo, hi, step=None) -> Range:
        """This spec cut to a sweep's ends, ``lo`` to ``hi`` every ``step``.

        A twin over a precomputed sweep can move only between its points; cut
        this way, every value its slider reaches is one the live slider reaches.

        Args:
            lo, hi: the sweep's first and last values, on this spec's grid
                (``min + k * step``), ``min <= lo < hi <= max``.
            step: the sweep's spacing (default: this spec's step), a multiple
                of this spec's step.
        """
        lo, hi = _plain(lo), _plain(hi)
        step = self.step if step is None else _plain(step)
        for field_name, value in (("lo", lo), ("hi", hi)):
            self._check_value(field_name, value)
            if not _whole((value - self.min) / self.step):
                raise ValueError(
                    f"{field_name}={value!r} must lie on the live slider's grid "
                    f"{self.min!r} + k * {self.step!r} (control {self.name!r})"
                )
        if not lo < hi:
            raise ValueError(f"hi={hi!r} must be above lo={lo!r} ({self.name!r})")
        if not _is_number(step) or step <= 0 or not _whole(step / self.step):
            raise ValueError(
                f"step={step!r} must be a multiple of {self.step!r} "
                f"(control {self.name!r})"
            )
        return replace(
            self, min=lo, max=hi, step=step, default=min(max(self.default, lo), hi)
        )

    def points(self, values) -> Choice:
        """A radio of a sweep's points of this range, for a twin that offers cases.

        Where the page carries a few cases (0.02, 0.05, 0.1 ...) a radio shows
        them better than a slider with gaps; each must be a value the live
        slider reaches: in its range and on its grid (with ``log_base``, the
        values themselves, whose logarithms are on the grid).

        Args:
            values: the sweep's values (repeats allowed), in the live scale.

        Returns:
            A :class:`Choice` of this spec's name and labels over the values,
            sorted, starting at the one nearest ``default``.
        """
        vals = sorted(dict.fromkeys(_plain(v) for v in values))
        if not vals:
            raise ValueError(f"values=[] must hold one value or more ({self.name!r})")
        for v in vals:
            if not _is_number(v) or (self.log_base is not None and v <= 0):
                raise ValueError(f"values hold {v!r}, not a number the slider shows")
            x = v if self.log_base is None else math.log(v, self.log_base)
            if not (
                self.min - 1e-9 <= x <= self.max + 1e-9
                and _whole((x - self.min) / self.step)
            ):
                raise ValueError(
                    f"values hold {v!r}, not a point of the live slider "
                    f"{self.min!r} + k * {self.step!r} up to {self.max!r}"
                    + ("" if self.log_base is None else f" (log {self.log_base:g})")
                    + f" (control {self.name!r})"
                )
        start = self.default if self.log_base is None else self.log_base**self.default
        default = min(vals, key=lambda v: abs(v - start))
        return Choice(
            self.name, options=tuple(vals), default=default, label=self.label,
            widget_label=self.widget_label,
        )  # fmt: skip

    def binding(self):
        """The page's input: ``alt.binding_range(min, max, step, name=label)``."""
        import altair as alt

        return alt.binding_range(
            min=self.min, max=self.max, step=self.step, name=self.label
        )

    def param(self, value=None, **kwargs):
        """The twin's ``alt.param`` bound to :meth:`binding`.

        Args:
            value: where the page's slider starts (default ``default``); with
                ``log_base``, an exponent. It must lie in the range.
            **kwargs: passed to ``alt.param``.
        """
        import altair as alt

        value = self.default if value is None else _plain(value)
        self._check_value("value", value)
        return alt.param(name=self.name, value=value, bind=self.binding(), **kwargs)

    def widget(self, value=None, **kwargs):
        """The live slider: ``IntSlider``, ``FloatSlider`` or ``FloatLogSlider``.

        Args:
            value: where it starts (default ``default``), in the widget's own
                scale: with ``log_base``, ``base ** exponent``; otherwise it must
                lie in the range.
            **kwargs: passed to the slider (``style``, ``continuous_update``...).
        """
        import ipywidgets as w

        kw = {"description": self.widget_label or self.label.strip(), **kwargs}
        if self.log_base is not None:
            low, high = self.log_base**self.min, self.log_base**self.max
            if value is None:
                value = self.log_base**self.default
            elif not _is_number(value) or not low * (1 - 1e-9) <= value <= high * (
                1 + 1e-9
            ):
                raise ValueError(
                    f"value={value!r} must be in [{low:g}, {high:g}] "
                    f"({self.log_base:g} ** [{self.min!r}, {self.max!r}], "
                    f"control {self.name!r})"
                )
            return w.FloatLogSlider(
                value=value, base=self.log_base, min=self.min, max=self.max,
                step=self.step, **kw,
            )  # fmt: skip
        value = self.default if value is None else value
        self._check_value("value", value)
        cls = w.IntSlider if self.integer else w.FloatSlider
        return cls(value=value, min=self.min, max=self.max, step=self.step, **kw)


@dataclass(frozen=True)
class Choice:
    """One of a few options, on buttons, a menu or a slider of values.

    Args:
        name: the Vega parameter's name.
        options: the values (at least one, no repeats).
        default: the option both controls start at.
        label: the page input's label.
        widget_label: the live control's description (default: ``label``).
        labels: what each option shows as (default: the options themselves).
        widget_kind: the live control, one of :data:`WIDGET_KINDS`.
        binding_kind: the page's input, one of :data:`BINDINGS`.
    """

    name: str
    options: tuple
    default: Any
    label: str
    widget_label: str | None = None
    labels: tuple | None = None
    widget_kind: str = "dropdown"
    binding_kind: str = "radio"

    def __post_init__(self):
        _check_name(self.name)
        if isinstance(self.options, str | bytes):
            raise ValueError(f"options={self.options!r} must be a sequence of values")
        object.__setattr__(self, "options", tuple(self.options))
        if not self.options:
            raise ValueError(f"options=() must hold one value or more ({self.name!r})")
        if len(set(map(repr, self.options))) != len(self.options):
            raise ValueError(f"options={self.options!r} repeat a value ({self.name!r})")
        self._check_value("default", self.default)
        _check_label("label", self.label)
        if self.widget_label is not None:
            _check_label("widget_label", self.widget_label)
        if self.labels is not None:
            object.__setattr__(self, "labels", tuple(self.labels))
            if len(self.labels) != len(self.options):
                raise ValueError(
                    f"labels={self.labels!r} must give one label per option "
                    f"({len(self.options)}) (control {self.name!r})"
                )
        if self.widget_kind not in WIDGET_KINDS:
            raise ValueError(
                f"widget_kind={self.widget_kind!r} must be one of {WIDGET_KINDS}"
            )
        if self.binding_kind not in BINDINGS:
            raise ValueError(
                f"binding_kind={self.binding_kind!r} must be one of {BINDINGS}"
            )

    def _check_value(self, field_name: str, value) -> None:
        if value not in self.options:
            raise ValueError(
                f"{field_name}={value!r} must be one of {list(self.options)} "
                f"(control {self.name!r})"
            )

    def among(self, values) -> Choice:
        """This spec cut to the options a sweep holds, in this spec's order.

        A twin over a precomputed sweep offers only the cases it carries; cut
        this way, each is an option of the live control too.

        Args:
            values: the sweep's values, each one of ``options`` (repeats allowed).
        """
        values = list(values)
        strays = [v for v in dict.fromkeys(values) if v not in self.options]
        if not values or strays:
            raise ValueError(
                f"values={values!r} must be one or more of {list(self.options)} "
                f"(control {self.name!r}); not options: {strays}"
            )
        keep = [i for i, o in enumerate(self.options) if o in values]
        options = tuple(self.options[i] for i in keep)
        labels = None if self.labels is None else tuple(self.labels[i] for i in keep)
        default = self.default if self.default in options else options[-1]
        return replace(self, options=options, labels=labels, default=default)

    def binding(self):
        """The page's input: ``alt.binding_radio`` or ``alt.binding_select``."""
        import altair as alt

        make = alt.binding_radio if self.binding_kind == "radio" else alt.binding_select
        extra = {} if self.labels is None else {"labels": list(self.labels)}
        return make(options=list(self.options), name=self.label, **extra)

    def param(self, value=None, **kwargs):
        """The twin's ``alt.param`` bound to :meth:`binding`."""
        import altair as alt

        value = self.default if value is None else _plain(value)
        self._check_value("value", value)
        return alt.param(name=self.name, value=value, bind=self.binding(), **kwargs)

    def widget(self, value=None, **kwargs):
        """The live control (see :data:`WIDGET_KINDS`), starting at ``value``."""
        import ipywidgets as w

        value = self.default if value is None else value
        self._check_value("value", value)
        cls = {
            "dropdown": w.Dropdown,
            "toggle": w.ToggleButtons,
            "radio": w.RadioButtons,
            "slider": w.SelectionSlider,
        }[self.widget_kind]
        options = (
            list(self.options)
            if self.labels is None
            else list(zip(self.labels, self.options, strict=True))
        )
        kw = {"description": self.widget_label or self.label.strip(), **kwargs}
        return cls(options=options, value=value, **kw)


__all__ = ["BINDINGS", "WIDGET_KINDS", "Choice", "Range"]
