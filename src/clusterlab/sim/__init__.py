"""Discrete-event simulations (SimPy): frozen parameters and a seed in, DataFrame out.

One module per topic (``clocks``, ``failures`` for failure detection,
``checkpointing`` for failures' cost, ``stragglers``); each is loaded on first use
as ``cl.sim.<topic>``. Where a sweep needs speed a module also has a
vectorised NumPy engine, tested against its SimPy model.
"""

from .._lazy import lazy_attributes

__getattr__, __dir__ = lazy_attributes(__name__, __path__)
