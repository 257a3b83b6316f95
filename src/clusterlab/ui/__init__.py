"""Thin ipywidgets wiring: controls -> measurements or models -> charts.

A live widget needs a Python kernel. ``show`` displays it together with a static
chart of its default state: Jupyter and Colab render the widget, while the built
book (which has no kernel) renders the static chart and a note instead, so no
dead control ever appears on a page.
"""

from .live import LIVE_NOTE, message_size_explorer, show

__all__ = ["LIVE_NOTE", "message_size_explorer", "show"]

from .._lazy import lazy_attributes  # noqa: E402

# Topic modules added later load on first use, e.g. cl.ui.<topic>.
__getattr__, __dir__ = lazy_attributes(__name__, __path__)
