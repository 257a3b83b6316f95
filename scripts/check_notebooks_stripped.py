"""Check that notebooks are committed without outputs (or strip them with --fix).

    python scripts/check_notebooks_stripped.py [--fix] [NOTEBOOK.ipynb ...]

With no files it checks every ``.ipynb`` of the repository (build folders, the
virtual environment and checkpoints skipped). A notebook fails when a code cell
has outputs or an execution count. It exits 1 if any notebook fails, naming
each one and its first cell with output; ``--fix`` strips them instead, written
as nbformat writes notebooks. It needs nothing but Python, so the pre-commit
hook runs it without installing anything.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = {".git", ".venv", "_build", "build", ".ipynb_checkpoints", "node_modules"}


def notebooks(root: Path) -> list[Path]:
    """Every notebook under ``root`` outside the skipped folders."""
    return sorted(
        p
        for p in root.rglob("*.ipynb")
        if not SKIP.intersection(p.relative_to(root).parts)
    )


def dirty_cells(nb: dict) -> list[int]:
    """Indices of the code cells that hold outputs or an execution count."""
    return [
        i
        for i, cell in enumerate(nb.get("cells", []))
        if cell.get("cell_type") == "code"
        and (cell.get("outputs") or cell.get("execution_count") is not None)
    ]


def strip(nb: dict) -> dict:
    """The notebook with every code cell's outputs and execution count removed."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    return nb


def main(argv: list[str] | None = None) -> int:
    """Check (or fix) the notebooks; return 0 if all are clean, else 1."""
    parser = argparse.ArgumentParser(prog="check_notebooks_stripped.py")
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--fix", action="store_true", help="strip the outputs")
    args = parser.parse_args(argv)
    failed = 0
    for path in args.files or notebooks(ROOT):
        try:
            nb = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            print(f"{path}: not a readable notebook ({err})")
            failed += 1
            continue
        dirty = dirty_cells(nb)
        if not dirty:
            continue
        if args.fix:
            text = json.dumps(strip(nb), sort_keys=True, indent=1, ensure_ascii=False)
            path.write_text(text + "\n", encoding="utf-8")
            print(f"{path}: stripped {len(dirty)} code cells")
        else:
            print(
                f"{path}: {len(dirty)} code cells hold outputs (first: cell "
                f"{dirty[0] + 1}); strip them with "
                "'python scripts/check_notebooks_stripped.py --fix'"
            )
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
