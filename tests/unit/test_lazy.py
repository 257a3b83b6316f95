"""Topic modules are found by name without importing the others, and never clash."""

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from clusterlab._lazy import _exported_names

SRC = Path(__file__).resolve().parents[2] / "src" / "clusterlab"
PACKAGES = ["check", "dist", "models", "perf", "sim", "solutions", "ui", "viz"]


@pytest.mark.parametrize("package", PACKAGES)
def test_each_name_resolves_unless_several_modules_export_it(package):
    import clusterlab as cl

    pkg = getattr(cl, package)
    counts = Counter()
    for file in (SRC / package).glob("[!_]*.py"):
        counts.update(_exported_names(file))
    for name, count in counts.items():
        if count == 1 or name in vars(pkg):
            assert getattr(pkg, name) is not None, f"cl.{package}.{name}"
        else:
            with pytest.raises(AttributeError, match="ambiguous"):
                getattr(pkg, name)


def test_a_lookup_imports_only_the_module_that_defines_the_name():
    code = (
        "import sys, clusterlab as cl; cl.check.reduce_then_broadcast; "
        "print(sorted(m for m in sys.modules if m.startswith('clusterlab.check.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "['clusterlab.check._common', 'clusterlab.check.messages']"
