"""Pin the labs to one version of the package: a release tag, or a commit.

    python scripts/pin_release.py v0.2.0     # in the commit a release tags
    python scripts/pin_release.py 3e757a7    # an instructor's fork, one commit

On ``main`` every lab's set-up cell installs ``clusterlab @ git+<repo>@main`` on
Colab, so the package moves with the notebooks. A release (or an instructor
pinning a semester) rewrites the one place that names the ref, ``_config.yml``'s
``repository.branch``, and the set-up cell and Colab link of every lab and of
the template to the same ref: a student who opens a lab of that release in
week ten, from its Colab link, installs the package it was written for. The
contract tests check that they agree.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,99}")
BRANCH = re.compile(r"(?m)^(  branch: )(\S+)$")


def pin(ref: str, root: Path = ROOT) -> list[Path]:
    """Set the labs' ref to ``ref``; return the files changed."""
    if not isinstance(ref, str) or not REF.fullmatch(ref):
        raise ValueError(f"ref={ref!r} must be a tag, branch or commit name")
    config = root / "_config.yml"
    text = config.read_text()
    old = BRANCH.search(text)
    if old is None:
        raise ValueError(f"{config}: no 'repository: branch:' line")
    changed = []
    if old.group(2) != ref:
        config.write_text(BRANCH.sub(lambda m: m.group(1) + ref, text, count=1))
        changed.append(config)
    install = re.compile(r"(clusterlab @ git\+[^@\"\s]+@)([^\"\s\\]+)")
    colab = re.compile(
        r"(colab\.research\.google\.com/github/[^/\s]+/[^/\s]+/blob/)([^/\s]+)/"
    )
    for lab in sorted((root / "labs").glob("*.ipynb")):
        nb = json.loads(lab.read_text())
        edited = False
        for cell in nb["cells"]:
            source = "".join(cell["source"])
            new = install.sub(lambda m: m.group(1) + ref, source)
            new = colab.sub(lambda m: m.group(1) + ref + "/", new)
            if new != source:
                cell["source"] = new.splitlines(keepends=True)
                edited = True
        if edited:
            lab.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
            changed.append(lab)
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/pin_release.py")
    parser.add_argument("ref", help="a release tag (v0.2.0), a branch or a commit")
    args = parser.parse_args(argv)
    for path in pin(args.ref):
        print(f"pinned {path.relative_to(ROOT)} to {args.ref}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
