"""The package's layout rules: topics, not lab numbers, name things in the code."""

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "clusterlab"
LAB_NUMBER = re.compile(r"\b[Ll]abs? ?\d{1,2}\b")


def test_no_lab_number_in_package_code():
    """Renumbering labs must touch only notebooks and pages, never the package."""
    hits = [
        f"{p.relative_to(SRC)}:{i}: {line.strip()}"
        for p in sorted(SRC.rglob("*.py"))
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if LAB_NUMBER.search(line)
    ]
    assert not hits, "lab numbers in package code:\n" + "\n".join(hits)


def test_the_lab_number_scan_would_catch_one():
    assert LAB_NUMBER.search('"""Lab 09\'s widget"""')
    assert LAB_NUMBER.search("as in Labs 04 and 07")
    assert not LAB_NUMBER.search("the FSDP lab's widget, 4 labs")


def test_importing_the_package_skips_the_slow_optional_format_checker():
    """``import clusterlab`` must not pay rfc3987-syntax's grammar build (~3 s)."""
    import subprocess
    import sys

    code = (
        "import sys, clusterlab, jsonschema\n"
        "print(sys.modules.get('rfc3987_syntax') is None)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "True", out.stdout + out.stderr
