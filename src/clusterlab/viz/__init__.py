"""Altair chart builders: DataFrame in, chart out; one theme, units on every axis."""

from .messages import (
    alpha_beta_explorer,
    bandwidth_chart,
    message_time_chart,
    model_curve,
    world_size_chart,
)
from .theme import PALETTE, book_html, chart_html, choose_renderer

__all__ = [
    "PALETTE",
    "alpha_beta_explorer",
    "bandwidth_chart",
    "book_html",
    "chart_html",
    "choose_renderer",
    "message_time_chart",
    "model_curve",
    "world_size_chart",
]

from .._lazy import lazy_attributes  # noqa: E402

# Topic modules added later load on first use, e.g. cl.viz.<topic>.
__getattr__, __dir__ = lazy_attributes(__name__, __path__)
