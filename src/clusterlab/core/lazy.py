"""Packages whose files load on first use: ``cl.ring.ranks`` imports that file.

A package's ``__init__`` calls :func:`submodules`; attribute access then imports
the file of that name, so ``import clusterlab`` stays fast and a chapter that
draws a diagram never imports torch.
"""

from __future__ import annotations

import importlib
import pkgutil


def submodules(package: str, path):
    """Return ``(__getattr__, __dir__)`` for the package named ``package``.

    Args:
        package: the package's ``__name__``.
        path: the package's ``__path__``.
    """
    names = sorted(m.name for m in pkgutil.iter_modules(path))

    def __getattr__(name: str):
        if name in names:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return names

    return __getattr__, __dir__
