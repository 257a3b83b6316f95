"""Closed-form models: pure functions of their inputs, SI units, no I/O."""

from . import collectives

__all__ = ["collectives"]

from .._lazy import lazy_attributes  # noqa: E402

# Topic modules added later load on first use, e.g. cl.models.<topic>.
__getattr__, __dir__ = lazy_attributes(__name__, __path__)
