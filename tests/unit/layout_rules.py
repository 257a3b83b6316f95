"""The package's import rules, read from its source: who may import whom.

``tests/unit/test_layout.py`` holds the package to them; ``docs/architecture.md``
states them in words.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
ROLES = ("sim", "ranks", "measure", "chart", "diagram", "widget", "check", "answer")
# What each role may import, besides ``core`` and ``models``.
MAY_IMPORT = {
    "sim": {"sim"},
    "ranks": {"sim", "ranks"},
    "measure": {"sim", "ranks", "measure"},
    "chart": {"chart"},
    "diagram": {"chart", "diagram"},
    "widget": {"sim", "ranks", "measure", "chart", "diagram", "widget"},
    "check": {"sim", "ranks", "measure", "chart", "diagram", "check", "answer"},
    "answer": {"sim", "ranks", "measure", "answer"},
}
# Imports of a later topic, each with its reason (kept short on purpose).
LATER_TOPIC_ALLOWED: dict[tuple[str, str], str] = {
    ("clocks", "ring"): "the skewed-clock run reuses the ring all-reduce of messages",
    ("failures", "checkpointing"): "crash and resume saves with the DCP helpers",
}


def topics(src: Path = SRC) -> tuple[str, ...]:
    """The topics in table-of-contents order, read from the package's TOPICS."""
    tree = ast.parse((src / "clusterlab" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "TOPICS" for t in node.targets
        ):
            return tuple(ast.literal_eval(node.value))
    raise AssertionError("clusterlab.TOPICS not found")


def declared_roles(folder: Path) -> dict[str, str]:
    """The ``ROLES`` dict of a topic's ``__init__.py`` (files not named by role)."""
    init = folder / "__init__.py"
    if not init.exists():
        return {}
    for node in ast.parse(init.read_text()).body:
        # ``ROLES = {...}`` or, as the template writes it, ``ROLES: dict[...] = {...}``
        targets = [node.target] if isinstance(node, ast.AnnAssign) else []
        targets += node.targets if isinstance(node, ast.Assign) else []
        if node_value := getattr(node, "value", None):
            if any(isinstance(t, ast.Name) and t.id == "ROLES" for t in targets):
                return dict(ast.literal_eval(node_value))
    return {}


def place(path: Path, src: Path = SRC) -> tuple[str, str | None]:
    """(layer or topic, role) of a module file: ('core', None), ('ring', 'ranks')."""
    parts = path.relative_to(src / "clusterlab").with_suffix("").parts
    if len(parts) == 1:
        return "clusterlab", None
    folder, name = parts[0], parts[-1]
    if folder in ("core", "cluster", "models", "course", "_topic_template"):
        return folder, None
    if name == "__init__":
        return folder, "__init__"
    if name in ROLES:
        return folder, name
    return folder, declared_roles(src / "clusterlab" / folder).get(name)


def imported_modules(path: Path, src: Path = SRC) -> list[tuple[int, str]]:
    """(line, dotted module) of every clusterlab import in a file, at any depth."""
    parts = path.relative_to(src).with_suffix("").parts
    package = list(parts[:-1]) if parts[-1] != "__init__" else list(parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.startswith("clusterlab"):
                for alias in node.names:
                    out.append((node.lineno, f"{mod}.{alias.name}"))
        elif isinstance(node, ast.Import):
            out += [
                (node.lineno, a.name)
                for a in node.names
                if a.name.startswith("clusterlab")
            ]
    return out


def target_place(dotted: str, src: Path = SRC) -> tuple[str, str | None] | None:
    """(layer or topic, role) of an imported name's module, or None for the root."""
    parts = dotted.split(".")[1:]
    root = src / "clusterlab"
    for n in range(len(parts), 0, -1):
        file = root.joinpath(*parts[:n]).with_suffix(".py")
        if file.exists():
            return place(file, src)
        if (root.joinpath(*parts[:n]) / "__init__.py").exists():
            return place(root.joinpath(*parts[:n]) / "__init__.py", src)
    return None


def violations(src: Path = SRC) -> list[str]:
    """Every import that breaks a rule, as 'file:line: what'."""
    order = {t: i for i, t in enumerate(topics(src))}
    found = []
    for path in sorted((src / "clusterlab").rglob("*.py")):
        where, role = place(path, src)
        rel = path.relative_to(src)
        if where in order and role is None:
            found.append(
                f"{rel}: no role (name the file by its role, or add it to ROLES)"
            )
        for line, dotted in imported_modules(path, src):
            target = target_place(dotted, src)
            if target is None:
                continue
            to, to_role = target
            at = f"{rel}:{line}: imports {dotted}"
            if where == "core" and to != "core":
                found.append(f"{at} (core imports only core)")
            elif where == "cluster" and to not in ("core", "cluster"):
                found.append(f"{at} (cluster imports only core and cluster)")
            elif where == "models" and to not in ("core", "models"):
                found.append(f"{at} (models import only core and models)")
            elif where in order and to in order:
                if (
                    role
                    and role != "__init__"
                    and to_role not in MAY_IMPORT[role] | {"__init__"}
                ):
                    found.append(f"{at} ({role} may not import {to_role})")
                if order[to] > order[where] and (where, to) not in LATER_TOPIC_ALLOWED:
                    found.append(f"{at} (a later topic: {to} after {where})")
    return found
