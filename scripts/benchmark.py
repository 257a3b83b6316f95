"""Time every lab at SMOKE size, the widgets, the launchers and a clean build.

Run it with ``make bench`` (or ``.venv/bin/python scripts/benchmark.py``). It
prints a Markdown table of (what, measured, budget) and writes the same table,
with the machine it ran on, to ``bench/results/benchmark.md``. The budgets are
the book's: each lab under 60 s, each widget update under 200 ms, the NumPy
straggler engine under 1 s for 1024 workers x 1000 steps, a clean build as
``make book`` does it under 6 minutes and ``make check`` under 3 minutes on 2
cores. It also reports the checks that the issues ask
to see as figures: ``bench_collective`` against a plain timing loop, the
alpha-beta fit on held-out sizes, and a real 4-rank straggler run against its
simulation.

Options: ``--skip-book`` (no book build), ``--labs 01 02`` (only those labs),
``--repeat N`` (launch timings averaged over N runs, default 5),
``--skip-widgets``, ``--skip-figures``, ``--skip-check`` (no ``make check``), and
``--test-command``, which also times the README's test command, ``make test``
(the budget is 15 minutes on 2 cores, the virtual environment already installed).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAB_BUDGET_S = 60.0
BUILD_BUDGET_S = 360.0
CHECK_BUDGET_S = 180.0
TEST_BUDGET_S = 900.0


def trivial(rank: int, world_size: int) -> int:
    """A 2-rank job that does nothing but join the group and return its rank."""
    return rank


def time_launchers(repeat: int) -> list[tuple[str, float, str]]:
    import clusterlab as cl
    from clusterlab.core.launcher import _launch

    rows = []
    cl.launch(trivial, 2)  # first call pays for imports
    for method in ("fork", "spawn"):
        start = time.perf_counter()
        for _ in range(repeat):
            assert _launch(trivial, 2, "gloo", 60.0, method, {}) == [0, 1]
        label = (
            "cl.launch (fork, the default on CPU)"
            if method == "fork"
            else "cl.launch forced to spawn"
        )
        rows.append(
            (
                f"trivial 2-rank job: {label}",
                (time.perf_counter() - start) / repeat,
                "< 1 s" if method == "fork" else "",
            )
        )
    start = time.perf_counter()
    for _ in range(max(1, repeat // 2)):
        cl.core.torchrun.run_torchrun(
            "clusterlab.message_passing.hello", 2, timeout=120
        )
    rows.append(
        (
            "trivial 2-rank job: torchrun --standalone",
            (time.perf_counter() - start) / max(1, repeat // 2),
            "",
        )
    )
    return rows


WIDGET_SETUP = """
import json, time
import ipywidgets as w
import pandas as pd
import clusterlab as cl
from IPython.display import display

CONTROLS = (w.FloatSlider, w.IntSlider, w.FloatLogSlider, w.Dropdown,
            w.RadioButtons, w.ToggleButtons, w.SelectionSlider, w.Checkbox)

def first_control(box):
    todo = [box]
    while todo:
        x = todo.pop(0)
        if isinstance(x, CONTROLS):
            return x
        todo.extend(getattr(x, "children", ()))
    raise ValueError(f"no control in {box!r}")

def nudge(c):
    if isinstance(c, w.Checkbox):
        c.value = not c.value
    elif hasattr(c, "options"):
        c.index = (c.index + 1) % len(c.options)
    elif isinstance(c, w.FloatLogSlider):
        up = c.value * c.base ** c.step
        c.value = up if up <= c.base ** c.max else c.value / c.base ** c.step
    else:
        up = c.value + c.step
        c.value = up if up <= c.max else c.value - c.step

def update_ms(widget, rounds=3):
    display(widget)
    control, best = first_control(widget), float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        nudge(control)
        best = min(best, time.perf_counter() - t0)
    return best * 1e3
"""

#: Each lab's widget, built with small stand-in inputs where it needs some.
WIDGETS = {
    "Lab 02 clock skew": "cl.clocks.widget.clock_skew_explorer()",
    "Lab 03 heartbeat detector": "cl.failures.widget.heartbeat_widget()",
    "Lab 04 busbw": "cl.collectives.widget.busbw_explorer(5e-5, 3e9, "
    "cl.core.bench.bench_collective('all_reduce', [2**10, 2**16, 2**20], 2))",
    "Lab 05 all-reduce algorithms": "cl.ring.widget.allreduce_algorithm_explorer()",
    "Lab 06 interconnect calculator": (
        "cl.interconnects.widget.interconnect_calculator()"
    ),
    "Lab 07 roofline": "cl.roofline.widget.roofline_explorer(pd.DataFrame("
    "[('this CPU', 1.6e11, 6e9), ('H100 SXM5', 9.894e14, 3.35e12)], "
    "columns=['machine', 'peak_flops', 'bandwidth_Bps']), "
    "cl.models.roofline.workload_table())",
    "Lab 08 DDP buckets": (
        "cl.data_parallel.widget.bucket_explorer(1e-3, 8e5, 1e-4, 2e9)"
    ),
    "Lab 09 ZeRO memory": "cl.data_parallel.widget.zero_memory_explorer()",
    "Lab 10 tensor-parallel cost": "cl.tensor_parallel.widget.tp_cost_widget()",
    "Lab 11 pipeline schedule": "cl.pipeline.widget.pipeline_schedule_widget()",
    "Lab 15 planner": "cl.planner.widget.planner_widget()",
    "Lab 16 stragglers": "cl.stragglers.widget.straggler_explorer()",
    "Lab 17 goodput": "cl.checkpointing.widget.goodput_widget()",
    "Lab 23 economics": "cl.economics.widget.economics_explorer()",
    "Lab 24 decision helper": "cl.decide.widget.decision_helper()",
}
WIDGET_BUDGET_MS = 200.0


def time_widgets() -> list[tuple[str, float, str]]:
    """Best of three updates of each lab's widget, in a real Jupyter kernel."""
    import json

    kernel, rows = _Kernel(ROOT / "labs"), []
    try:
        kernel.run(WIDGET_SETUP)
        for name, make in WIDGETS.items():
            # the first update pays one-off costs (imports, schema loading)
            code = f"update_ms({make}, 1)\nprint(json.dumps(update_ms({make})))"
            ms = json.loads(kernel.run(code)[-1])
            rows.append((f"widget update: {name} (ms)", ms, f"< {WIDGET_BUDGET_MS:g}"))
    finally:
        kernel.close()
    return rows


def time_figures() -> list[tuple[str, float, str]]:
    """The figures the issues ask to see, each measured here and now."""
    from dataclasses import replace

    import pandas as pd

    import clusterlab as cl

    rows = []
    plain = cl.core.bench.bench_vs_plain_loop(
        size_bytes=2**24, world_size=2, iters=5, rounds=8
    )
    rows.append(
        (
            "bench_collective / plain dist.all_reduce loop, 16 MiB, 2 ranks (ratio)",
            plain["bench_over_plain"],
            "0.85 to 1.15",
        )
    )
    sizes = [2**k for k in range(8, 23)]
    runs = [
        cl.core.bench.bench_collective("all_reduce", sizes, 2, iters=5)
        for _ in range(3)
    ]
    best = pd.concat(runs).sort_values("time_s").drop_duplicates("size_bytes")
    held = cl.core.alpha_beta.alpha_beta_holdout(best)
    rows.append(
        (
            "alpha-beta fit, median error on held-out sizes (fraction)",
            float(held["rel_error"].median()),
            "< 0.25",
        )
    )
    rows.append(
        (
            "alpha-beta fit, worst error on held-out sizes (fraction)",
            float(held["rel_error"].max()),
            "",
        )
    )
    S = cl.stragglers.sim
    params = S.StragglerParams(n_workers=1024, n_steps=1000)
    start = time.perf_counter()
    S.simulate(params, seed=0, engine="numpy")
    rows.append(
        (
            "NumPy straggler engine, 1024 workers x 1000 steps (s)",
            time.perf_counter() - start,
            "< 1",
        )
    )
    p = S.StragglerParams(n_workers=4, n_steps=16, base_s=0.05, jitter="normal", cv=0.3)
    run = cl.stragglers.ranks.run_straggler_scenarios({"jitter": p}, seed=0)
    sim = S.simulate(replace(p, allreduce_s=run["allreduce_s"].mean()), seed=0)
    rows.append(
        (
            "real 4-rank straggler run / its simulation, mean step (ratio)",
            S.mean_step_time(run) / S.mean_step_time(sim),
            "0.85 to 1.15",
        )
    )
    return rows


class _Kernel:
    """A Jupyter kernel that runs code cell by cell, as nbval does."""

    def __init__(self, cwd: Path):
        from jupyter_client.manager import start_new_kernel

        self.km, self.kc = start_new_kernel(kernel_name="python3", cwd=str(cwd))

    def run(self, code: str) -> list[str]:
        """Run ``code``; return its stdout lines; raise if it raises."""
        msg_id, lines = self.kc.execute(code), []
        while True:
            msg = self.kc.get_iopub_msg(timeout=600)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream" and content["name"] == "stdout":
                lines += content["text"].splitlines()
            elif kind == "error":
                raise RuntimeError(f"{content['ename']}: {content['evalue']}")
            elif kind == "status" and content["execution_state"] == "idle":
                return lines

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def time_lab(path: Path) -> float:
    """Seconds to run every code cell of a lab in a fresh kernel."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    kernel = _Kernel(path.parent)
    try:
        for cell in nb.cells:
            if cell.cell_type == "code":
                kernel.run(cell.source)
    finally:
        kernel.close()
    return time.perf_counter() - start


def time_book_build() -> float:
    """A clean build as ``make book`` runs it: the labs two at a time, then the book."""
    with tempfile.TemporaryDirectory() as out:
        cache = Path(out) / "labs_cache"
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "scripts/execute_labs.py", "--cache", str(cache)]
            + ["--jobs", "2"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [str(Path(sys.executable).parent / "jupyter-book"), "build", "."]
            + ["-W", "-n", "--keep-going", "--path-output", out],
            cwd=ROOT,
            check=True,
            capture_output=True,
            env=dict(os.environ, CLUSTERLAB_EXECUTION_CACHE=str(cache)),
        )
        return time.perf_counter() - start


def time_test_command(command=("make", "test")) -> float:
    """Wall time of the README's test command, which must pass.

    Raises:
        RuntimeError: the command failed; the message holds its exit status and
            the end of its output.
    """
    start = time.perf_counter()
    result = subprocess.run(list(command), cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        tail = (result.stdout + result.stderr)[-3000:]
        raise RuntimeError(
            f"{' '.join(command)} failed (exit {result.returncode}) after "
            f"{seconds:.0f} s:\n{tail}"
        )
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    if lines:  # pytest's last line: how many passed and skipped, and in how long
        print(f"{' '.join(command)}: {lines[-1].strip('= ')}", file=sys.stderr)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-book", action="store_true")
    parser.add_argument("--labs", nargs="*", default=None, help="lab numbers, e.g. 01")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-widgets", action="store_true")
    parser.add_argument("--skip-figures", action="store_true")
    parser.add_argument("--skip-check", action="store_true")
    parser.add_argument("--test-command", action="store_true")
    args = parser.parse_args()
    os.environ["CLUSTERLAB_SMOKE"] = "1"

    rows = time_launchers(args.repeat)
    labs = sorted((ROOT / "labs").glob("[0-9][0-9]_*.ipynb"))
    if args.labs:
        labs = [p for p in labs if p.name[:2] in args.labs]
    for lab in labs:
        print(f"running {lab.name} ...", file=sys.stderr, flush=True)
        rows.append(
            (f"lab {lab.stem} (SMOKE)", time_lab(lab), f"< {LAB_BUDGET_S:.0f} s")
        )
    if not args.skip_widgets:
        print("timing the widgets in a kernel ...", file=sys.stderr, flush=True)
        rows += time_widgets()
    if not args.skip_figures:
        print("measuring the checked figures ...", file=sys.stderr, flush=True)
        rows += time_figures()
    if not args.skip_book:
        print("building the book from clean ...", file=sys.stderr, flush=True)
        rows.append(
            ("clean book build", time_book_build(), f"< {BUILD_BUDGET_S:.0f} s")
        )
    if not args.skip_check:
        print("running make check ...", file=sys.stderr, flush=True)
        rows.append(
            ("make check", time_test_command(("make", "check")),
             f"< {CHECK_BUDGET_S:.0f} s")
        )  # fmt: skip
    if args.test_command:
        print("running make test ...", file=sys.stderr, flush=True)
        rows.append(
            ("make test (the README's test command)", time_test_command(),
             f"< {TEST_BUDGET_S:.0f} s")
        )  # fmt: skip

    lines = ["| what | measured (s unless stated) | budget |", "|---|---:|---|"]
    lines += [f"| {what} | {secs:.3g} | {budget} |" for what, secs, budget in rows]
    import torch

    machine = (
        f"{platform.platform()}, Python {platform.python_version()}, torch "
        f"{torch.__version__}, {os.cpu_count()} CPU cores, "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )
    table = "\n".join(lines)
    print(table)
    out = ROOT / "bench" / "results" / "benchmark.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"# Benchmark\n\nMeasured on {machine}.\n\n{table}\n")
    print(f"\nwritten to {out.relative_to(ROOT)}", file=sys.stderr)
    over = [
        what
        for what, secs, budget in rows
        if (budget.startswith("< ") and secs > float(budget.split()[1]))
        or (" to " in budget and not _within(secs, budget))
    ]
    if over:
        print(f"over budget: {over}", file=sys.stderr)
    return 1 if over else 0


def _within(value: float, budget: str) -> bool:
    low, high = (float(x) for x in budget.split(" to "))
    return low <= value <= high


if __name__ == "__main__":
    sys.exit(main())
