"""Every lab on Colab's own versions, the package installed as the labs install it.

    make colab-check                     # or: python scripts/colab_check.py
    COLAB_PYTHON=/path/to/python3.13 make colab-check

It finds a Python 3.13 (``COLAB_PYTHON``, then ``python3.13`` on PATH, then
pyenv's), makes a virtual environment from ``scripts/colab_pins.txt`` in
``_build/colab/venv`` (kept between runs), builds the package's wheel and
installs it there as the labs' set-up cell does, not editable (so a file the
wheel leaves out shows), runs every lab at SMOKE size under nbval, one lab at a
time, and prints a table of each lab's result and time. It is the check before
each release (``CONTRIBUTING.md``), not part of the test command: torch 2.11's
wheel and its libraries are about 3 GB.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PINS = ROOT / "scripts" / "colab_pins.txt"
LABS = sorted((ROOT / "labs").glob("[0-9][0-9]_*.ipynb"))


def read_pins(path: Path = PINS) -> dict:
    """The pins file as ``{"python": "3.13", "date": ..., "packages": {name: ver}}``."""
    out, packages = {}, {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        meta = re.fullmatch(r"#\s*(python|date):\s*(\S+)", line)
        if meta:
            out[meta.group(1)] = meta.group(2)
            continue
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([A-Za-z0-9_.+-]+)", line)
        if not m:
            raise ValueError(f"{path.name}: {raw!r} is not NAME==VERSION")
        packages[m.group(1).lower().replace("_", "-")] = m.group(2)
    for key in ("python", "date"):
        if key not in out:
            raise ValueError(f"{path.name} lacks its '# {key}:' line")
    out["packages"] = packages
    return out


def find_python(version: str) -> str | None:
    """A Python interpreter of ``version`` (``3.13``), or None."""
    candidates = [os.environ.get("COLAB_PYTHON"), shutil.which(f"python{version}")]
    pyenv = shutil.which("pyenv")
    if pyenv:
        roots = subprocess.run([pyenv, "root"], capture_output=True, text=True)
        base = Path(roots.stdout.strip()) / "versions"
        candidates += sorted(
            (str(p / "bin" / f"python{version}") for p in base.glob(f"{version}.*")),
            reverse=True,
        )
    for exe in filter(None, candidates):
        got = subprocess.run(
            [exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
        )
        if got.returncode == 0 and got.stdout.strip() == version:
            return exe
    return None


def labs_to_run(labs: list[Path] = LABS) -> list[str]:
    """The labs the check runs: every numbered lab of ``labs/``."""
    return [lab.name for lab in labs]


def uncovered(run: list[str], labs: list[Path] = LABS) -> list[str]:
    """The labs of ``labs/`` that ``run`` leaves out."""
    return sorted({lab.name for lab in labs} - set(run))


def _venv(python: str, folder: Path, pins: Path) -> Path:
    bin_ = folder / "bin"
    stamp = folder / ".pins"
    if not (bin_ / "python").exists() or stamp.read_text() != pins.read_text():
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run([python, "-m", "venv", str(folder)], check=True)
        pip = [str(bin_ / "python"), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "--upgrade", "pip"], check=True)
        subprocess.run([*pip, "-r", str(pins)], check=True)
        stamp.write_text(pins.read_text())
    return bin_


def _install_wheel(bin_: Path, out: Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
    py = str(bin_ / "python")
    subprocess.run(
        [py, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        check=True,
    )
    (wheel,) = out.glob("clusterlab-*.whl")
    subprocess.run(
        [py, "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall"]
        + [str(wheel)],
        check=True,
    )


def _run_lab(bin_: Path, lab: str) -> tuple[str, float, str]:
    start = time.perf_counter()
    env = dict(os.environ, CLUSTERLAB_SMOKE="1")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [str(bin_ / "python"), "-m", "pytest", f"labs/{lab}", "-q"]
        + ["-p", "no:cacheprovider", "--nbval-lax"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    last = (proc.stdout.strip().splitlines() or ["no output"])[-1]
    return ("pass" if proc.returncode == 0 else "FAIL"), seconds, last


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/colab_check.py")
    parser.add_argument("labs", nargs="*", help="lab file names (default: all)")
    parser.add_argument("--venv", type=Path, default=ROOT / "_build" / "colab" / "venv")
    args = parser.parse_args(argv)
    pins = read_pins()
    python = find_python(pins["python"])
    if python is None:
        print(
            f"No Python {pins['python']} found (COLAB_PYTHON, python{pins['python']} "
            "on PATH, or pyenv): install one and run this again."
        )
        return 2
    print(f"Colab's versions of {pins['date']} with {python}")
    bin_ = _venv(python, args.venv, PINS)
    _install_wheel(bin_, args.venv.parent / "wheel")
    labs = args.labs or labs_to_run()
    rows = []
    print(f"{'lab':<28} {'result':<7} {'s':>6}  last line")
    for lab in labs:
        result, seconds, last = _run_lab(bin_, lab)
        rows.append(result)
        print(f"{lab:<28} {result:<7} {seconds:6.1f}  {last[:60]}", flush=True)
    failed = rows.count("FAIL")
    print(f"{len(rows) - failed} of {len(rows)} labs passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
