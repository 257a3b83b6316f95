"""Altair chart builders: DataFrame in, chart out; one theme, units on every axis."""

from .messages import (
    alpha_beta_explorer,
    bandwidth_chart,
    message_time_chart,
    model_curve,
    world_size_chart,
)
from .theme import PALETTE, book_html, chart_html, use_book_renderer_if_building

__all__ = [
    "PALETTE",
    "alpha_beta_explorer",
    "bandwidth_chart",
    "book_html",
    "chart_html",
    "message_time_chart",
    "model_curve",
    "use_book_renderer_if_building",
    "world_size_chart",
]
