"""Closed-form models: pure functions of their inputs, SI units, no I/O."""

from . import collectives

__all__ = ["collectives"]
