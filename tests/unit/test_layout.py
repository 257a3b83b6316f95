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


# --- One folder per topic: the import rules (layout_rules.py), held as tests.

import json as _json  # noqa: E402
import sys as _sys  # noqa: E402

_sys.path.insert(0, str(Path(__file__).parent))
import layout_rules as rules  # noqa: E402

ROOT = SRC.parents[1]


def test_every_import_follows_the_layout_rules():
    assert rules.violations() == []


def _plant(tmp_path, files: dict[str, str]) -> Path:
    src = tmp_path / "src"
    base = {
        "clusterlab/__init__.py": 'TOPICS = ("a", "b")\n',
        "clusterlab/core/__init__.py": "",
        "clusterlab/models/__init__.py": "",
        "clusterlab/cluster/__init__.py": "",
        "clusterlab/a/__init__.py": 'ROLES = {"helpers": "ranks"}\n',
        "clusterlab/b/__init__.py": "",
    }
    for rel, text in {**base, **files}.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    return src


def test_the_rules_catch_each_planted_violation(tmp_path):
    src = _plant(
        tmp_path,
        {
            "clusterlab/core/util.py": "from clusterlab.a.ranks import f\n",
            "clusterlab/models/m.py": "from clusterlab.a import sim\n",
            "clusterlab/cluster/nodes.py": "from clusterlab.models.m import y\n",
            "clusterlab/cluster/ok.py": "from clusterlab.core.util import z\n",
            "clusterlab/a/sim.py": "x = 1\n",
            "clusterlab/a/ranks.py": "def f():\n    from clusterlab.b.ranks import g\n",
            "clusterlab/a/chart.py": "from clusterlab.a.sim import x\n",
            "clusterlab/a/answer.py": "from ..a.check import c\n",
            "clusterlab/a/check.py": "c = 1\n",
            "clusterlab/a/helpers.py": "from clusterlab.a.sim import x\n",
            "clusterlab/a/notes.py": "",
            "clusterlab/b/ranks.py": "from clusterlab.a.ranks import f\n",
        },
    )
    found = rules.violations(src)
    expected = [
        "core imports only core",
        "models import only core and models",
        "cluster imports only core and cluster",
        "a later topic: b after a",
        "chart may not import sim",
        "answer may not import check",
        "no role",
    ]
    for what in expected:
        assert any(what in v for v in found), (what, found)
    assert len(found) == len(expected), found  # helpers (ranks) and b -> a are allowed


def test_a_lab_names_its_topic_and_at_most_one_earlier_one():
    """Lab N belongs to TOPICS[N-1]; it may use core, models and one earlier topic."""
    import re

    import clusterlab as cl

    labs = sorted((ROOT / "labs").glob("[0-9][0-9]_*.ipynb"))
    assert len(labs) == len(cl.TOPICS)
    for i, lab in enumerate(labs):
        nb = _json.loads(lab.read_text())
        code = "\n".join(
            "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"
        )
        used = set(re.findall(r"\b(?:cl|clusterlab)\.([a-z_]+)", code))
        own = cl.TOPICS[i]
        others = sorted(u for u in used & set(cl.TOPICS) if u != own)
        assert own in used, (lab.name, own)
        assert len(others) <= 1, (lab.name, others)
        assert all(cl.TOPICS.index(o) < i for o in others), (lab.name, others)


def test_importing_the_package_loads_no_topic_and_no_torch():
    import subprocess

    code = (
        "import sys, clusterlab as cl\n"
        "cl.message_passing.diagram\n"  # a chapter drawing a diagram
        "loaded = [m for m in sys.modules if m.startswith('clusterlab.')]\n"
        "print('torch' in sys.modules, sorted(loaded))"
    )
    out = subprocess.run(
        [_sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    torch_loaded, loaded = out.stdout.split(" ", 1)
    assert torch_loaded == "False", out.stdout
    assert "clusterlab.ring" not in loaded and "clusterlab.experts" not in loaded
