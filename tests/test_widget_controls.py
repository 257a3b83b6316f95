"""Every control of every widget does something a reader can see.

Each widget is built at its defaults in a real kernel and every control is moved
in turn (``tests/widget_probe.py``): the chart it draws or the text it shows
must change, and a control that cannot have an effect at some setting must say
why in the widget's text (which is a change of text too). Two made-up widgets,
one whose slider is wired to nothing and one that redraws the same chart, show
that the probe does catch a dead control.
"""

from __future__ import annotations

import json

import nbformat
import pytest

from book_helpers import ROOT

SETUP = f"""
import sys
sys.path.insert(0, {str(ROOT / "tests")!r})
import json
import ipywidgets as w
import pandas as pd
from IPython.display import display
import clusterlab as cl
from widget_probe import probe

def report(name, make):
    print("PROBE " + json.dumps({{"widget": name, "results": probe(make)}}))

measured = pd.DataFrame({{
    "size_bytes": [16, 1024, 65536, 1048576],
    "time_s": [2e-5, 3e-5, 2e-4, 3e-3],
    "busbw_Bps": [8e5, 3e7, 3e8, 3.5e8],
    "world_size": [2, 2, 2, 2],
}})
"""

# name -> the expression that builds the widget at the lab's defaults.
WIDGETS = {
    "message_size_explorer": (
        "cl.message_passing.widget.message_size_explorer(measured)"
    ),
    "clock_skew_explorer": "cl.clocks.widget.clock_skew_explorer()",
    "heartbeat_widget": "cl.failures.widget.heartbeat_widget()",
    "busbw_explorer": "cl.collectives.widget.busbw_explorer(2e-5, 4e8, measured)",
    "allreduce_algorithm_explorer": "cl.ring.widget.allreduce_algorithm_explorer()",
    "interconnect_calculator": "cl.interconnects.widget.interconnect_calculator()",
    "roofline_explorer": (
        "cl.roofline.widget.roofline_explorer(cl.published.load('gpu_specs').head(3), "
        "cl.models.roofline.workload_table())"
    ),
    "bucket_explorer": "cl.data_parallel.widget.bucket_explorer(0.02, 4e6, 2e-5, 4e8)",
    "zero_memory_explorer": "cl.data_parallel.widget.zero_memory_explorer()",
    "tp_cost_widget": "cl.tensor_parallel.widget.tp_cost_widget()",
    "pipeline_schedule_widget": "cl.pipeline.widget.pipeline_schedule_widget()",
    "planner_widget": "cl.planner.widget.planner_widget()",
    "straggler_explorer": "cl.stragglers.widget.straggler_explorer()",
    "goodput_widget": "cl.checkpointing.widget.goodput_widget()",
    "economics_explorer": "cl.economics.widget.economics_explorer()",
    "decision_helper": "cl.decide.widget.decision_helper()",
    "ep_alltoall_widget": "cl.experts.widget.ep_alltoall_widget()",
    "cp_time_widget": "cl.long_context.widget.cp_time_widget()",
    "scheduler_explorer": "cl.control_plane.widget.scheduler_explorer()",
    "loss_scale_widget": (
        "cl.precision.widget.loss_scale_widget(cl.precision.measure.loss_gradient())"
    ),
    "slow_rank_explorer": "cl.debugging.widget.slow_rank_explorer()",
    "disagg_explorer": "cl.serving_cluster.widget.disagg_explorer()",
    "goodput_explorer_widget": "cl.fault_tolerance.widget.goodput_explorer_widget()",
}

# Made-up widgets that the probe must find at fault.
DEAD = {
    "a slider wired to nothing": """
def make():
    s = w.IntSlider(value=1, min=1, max=5, description="dead")
    out = w.Output()
    with out:
        display(pd.DataFrame({"x": [1]}))
    return w.VBox([s, out])
""",
    "a redraw of the same chart": """
def make():
    s = w.IntSlider(value=1, min=1, max=5, description="same")
    out = w.Output()
    def draw(_=None):
        out.clear_output(wait=True)
        with out:
            display(cl.message_passing.chart.world_size_chart(measured))
    s.observe(draw, names="value")
    draw()
    return w.VBox([s, out])
""",
}


def _run(cells: list[str], tmp_path) -> dict[str, list[dict]]:
    import nbclient

    # The grader's kernel client: its channels poll, so that a cell's reply that
    # arrives among many widget messages is not missed (jupyter/nbclient#312).
    from clusterlab.course.grade_kernel import ThisPythonKernel

    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(c) for c in [SETUP, *cells]]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbclient.NotebookClient(
        nb,
        timeout=300,
        kernel_manager_class=ThisPythonKernel,
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    found = {}
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            for line in out.get("text", "").splitlines():
                if line.startswith("PROBE "):
                    entry = json.loads(line.removeprefix("PROBE "))
                    found[entry["widget"]] = entry["results"]
    return found


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    cells = [f"report({name!r}, lambda: {expr})" for name, expr in WIDGETS.items()]
    cells += [f"{code}\nreport({name!r}, make)" for name, code in DEAD.items()]
    return _run(cells, tmp_path_factory.mktemp("controls"))


@pytest.mark.parametrize("name", sorted(WIDGETS))
def test_every_control_changes_the_chart_or_the_text(probed, name):
    results = probed[name]
    assert results, f"{name}: no control found"
    dead = [r for r in results if not r["changed"]]
    assert not dead, f"{name}: moving these controls changed nothing: {dead}"


@pytest.mark.parametrize("name", sorted(DEAD))
def test_the_probe_finds_a_dead_control(probed, name):
    (result,) = probed[name]
    assert result["moved"] is not None
    assert not result["changed"], result
