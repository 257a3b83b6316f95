"""Lazy attributes for subpackages that grow one module per topic.

``cl.sim.clocks`` imports ``clusterlab/sim/clocks.py`` on first use, and
``cl.check.ring_allgather`` imports only the module whose ``__all__`` names it.
A subpackage's ``__init__`` then needs no edit when a topic module is added, and
``import clusterlab`` stays fast because topic modules load only when used.

Which module defines a name is read from the modules' source (their literal
``__all__`` lists) without importing them, once per package; a name found is
then set on the package, so later lookups cost nothing. This matters inside
forked ranks, where importing every topic module to find one name would take
seconds. A name that several modules export (``simulate`` in each simulation
module, say) is ambiguous, so it is reachable only through its module:
``cl.sim.clocks.simulate``.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import sys
from pathlib import Path


def _modules(path) -> list[str]:
    return sorted(
        m.name for m in pkgutil.iter_modules(path) if not m.name.startswith("_")
    )


def _exported_names(file: Path) -> list[str]:
    """The literal ``__all__`` of a module's source, or [] if it has none."""
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return []
    for node in tree.body:
        targets = []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            try:
                return [str(n) for n in ast.literal_eval(value)]
            except ValueError:
                return []
    return []


def lazy_attributes(package: str, path):
    """Return ``(__getattr__, __dir__)`` for the package named ``package``.

    Args:
        package: the package's ``__name__``.
        path: the package's ``__path__``.
    """
    index: dict[str, list[str]] = {}

    def where() -> dict[str, list[str]]:
        """Each exported name with the modules that export it."""
        if not index:
            for mod_name in _modules(path):
                for folder in path:
                    file = Path(folder) / f"{mod_name}.py"
                    if file.exists():
                        for name in _exported_names(file):
                            index.setdefault(name, []).append(mod_name)
        return index

    def __getattr__(name: str):
        if name in _modules(path):
            return importlib.import_module(f"{package}.{name}")
        found = [] if name.startswith("_") else where().get(name, [])
        if len(found) > 1:
            options = ", ".join(f"{package}.{m}.{name}" for m in found)
            raise AttributeError(
                f"{package}.{name} is ambiguous: several modules export it; "
                f"use one of {options}"
            )
        if found:
            mod = importlib.import_module(f"{package}.{found[0]}")
            if name in getattr(mod, "__all__", ()):
                value = getattr(mod, name)
                setattr(sys.modules[package], name, value)
                return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        names = set(vars(sys.modules[package])) | set(_modules(path))
        return sorted(names | {n for n, mods in where().items() if len(mods) == 1})

    return __getattr__, __dir__
