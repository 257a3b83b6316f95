"""The wheel that ``pip install`` builds (as the labs' Colab set-up does) holds
every package under ``src/`` and the published tables of ``data/``."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"


def source_packages(src: Path = SRC) -> set[str]:
    """Every folder under ``src`` with an ``__init__.py``, as a dotted name."""
    return {".".join(p.parent.relative_to(src).parts) for p in src.rglob("__init__.py")}


def missing_from(names: list[str], packages: set[str]) -> list[str]:
    """The packages of ``packages`` whose ``__init__.py`` is not among ``names``."""
    shipped = {
        ".".join(Path(n).parent.parts) for n in names if n.endswith("/__init__.py")
    }
    return sorted(packages - shipped)


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory) -> list[str]:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
        + ["-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("clusterlab-*.whl")
    return zipfile.ZipFile(wheel).namelist()


def test_the_wheel_holds_every_package_under_src(wheel_names):
    packages = source_packages()
    assert "clusterlab.core" in packages and "clusterlab.ring" in packages
    assert missing_from(wheel_names, packages) == []


def test_the_wheel_ships_the_tables(wheel_names):
    shipped = {
        Path(n).name for n in wheel_names if n.startswith("clusterlab/core/data/")
    }
    csvs = {p.name for p in (ROOT / "data").glob("*.csv")}
    assert csvs and csvs <= shipped


def test_a_package_left_out_is_caught():
    """The check fails on a planted omission: a wheel without one subpackage."""
    names = ["clusterlab/__init__.py", "clusterlab/core/__init__.py"]
    packages = {"clusterlab", "clusterlab.core", "clusterlab.ring.extra"}
    assert missing_from(names, packages) == ["clusterlab.ring.extra"]


def test_no_folder_under_src_is_named_dist_or_build():
    bad = [p for p in SRC.rglob("*") if p.is_dir() and p.name in ("dist", "build")]
    assert not bad, bad
