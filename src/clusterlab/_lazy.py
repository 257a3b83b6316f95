"""Lazy attributes for subpackages that grow one module per topic.

``cl.sim.clocks`` imports ``clusterlab/sim/clocks.py`` on first use, and
``cl.check.ring_allgather`` finds the module whose ``__all__`` names it. A
subpackage's ``__init__`` then needs no edit when a topic module is added, and
``import clusterlab`` stays fast because topic modules load only when used.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys


def _modules(path) -> list[str]:
    return sorted(
        m.name for m in pkgutil.iter_modules(path) if not m.name.startswith("_")
    )


def lazy_attributes(package: str, path):
    """Return ``(__getattr__, __dir__)`` for the package named ``package``.

    Args:
        package: the package's ``__name__``.
        path: the package's ``__path__``.
    """

    def __getattr__(name: str):
        if name in _modules(path):
            return importlib.import_module(f"{package}.{name}")
        if not name.startswith("_"):
            for mod_name in _modules(path):
                mod = importlib.import_module(f"{package}.{mod_name}")
                if name in getattr(mod, "__all__", ()):
                    return getattr(mod, name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        names = set(vars(sys.modules[package])) | set(_modules(path))
        for mod_name in _modules(path):
            mod = importlib.import_module(f"{package}.{mod_name}")
            names.update(getattr(mod, "__all__", ()))
        return sorted(names)

    return __getattr__, __dir__
