"""Closed-form models: pure functions of their inputs, SI units, no I/O.

One library shared by every topic (split by topic it would form import
circles): ``cl.models.<module>.<name>``, each module loaded on first use.
Published figures are read through ``cl.published``.
"""

from clusterlab.core.lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
