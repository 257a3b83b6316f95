"""Chart outputs stay lean: no Vega bundle in them, at most 50 KB each.

In local Jupyter a chart is sent as a Vega spec that the front end draws with its
own Vega; in the book it is a ``<div>`` and a call to the site's ``vegaEmbed``.
Neither carries a script bundle. A small notebook with a chart, a widget whose
Output redraws a chart, and a ``cl.show`` bundle is run in a real kernel and
each chart output is measured as the saved notebook holds it.
"""

from __future__ import annotations

import json

import altair as alt
import nbformat
import pandas as pd
import pytest

import clusterlab as cl
from book_helpers import measure_outputs
from clusterlab.core import theme

LIMIT_BYTES = 50_000

CELLS = [
    "import clusterlab as cl, pandas as pd, ipywidgets as w\n"
    "from IPython.display import display\n"
    "df = pd.DataFrame({'size_bytes': [4, 1024, 2**20], 'time_s': [1e-5, 2e-5, 1e-3],"
    " 'world_size': [2, 2, 2]})",
    "cl.message_passing.chart.world_size_chart(df)",
    "out = w.Output()\n"
    "n = w.IntSlider(value=2, min=2, max=8)\n"
    "def redraw(_=None):\n"
    "    out.clear_output(wait=True)\n"
    "    with out:\n"
    "        display(cl.message_passing.chart.world_size_chart(\n"
    "            df.assign(world_size=n.value)))\n"
    "n.observe(redraw, names='value')\n"
    "redraw()\n"
    "cl.show(w.VBox([n, out]), cl.message_passing.chart.world_size_chart(df))",
]


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    import nbclient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    tmp = tmp_path_factory.mktemp("lean")
    nbclient.NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp)}},
        store_widget_state=True,
    ).execute()
    return nb


def test_each_chart_output_of_a_kernel_is_under_50_kb(executed):
    outputs = measure_outputs().chart_outputs(executed)
    wheres = [o["where"] for o in outputs]
    assert any(w.startswith("cell") for w in wheres), wheres
    assert any(w.startswith("widget") for w in wheres), "the Output's chart"
    for out in outputs:
        assert out["bytes"] <= LIMIT_BYTES, out
        assert theme.VEGA_MIME in out["mimes"], out


def test_no_output_carries_a_script(executed):
    text = json.dumps(executed, default=str)
    assert "<script" not in text and "vegaEmbed" not in text


def test_the_show_bundle_sends_the_widget_and_its_note_only(executed):
    (shown,) = [o for o in executed.cells[2].outputs if "data" in o]
    assert set(shown["data"]) == {
        "application/vnd.jupyter.widget-view+json",
        "text/plain",
    }
    assert cl.core.show.LIVE_NOTE in shown["data"]["text/plain"]


def test_the_size_check_catches_a_chart_that_carries_the_bundle():
    spec = alt.Chart(pd.DataFrame({"x": [1, 2]})).mark_point().encode(x="x").to_dict()
    m = measure_outputs()
    heavy = theme.RENDERERS[theme.STANDALONE_RENDERER](spec)
    lean = theme.RENDERERS[theme.OFFLINE_RENDERER](spec)
    assert m.is_chart(heavy) and m.output_size_bytes(heavy) > LIMIT_BYTES
    assert m.is_chart(lean) and m.output_size_bytes(lean) < 15_000


def test_the_book_twin_still_holds_the_note_and_the_chart(monkeypatch):
    import IPython.display
    import ipywidgets as w

    shown = []
    monkeypatch.setattr(
        IPython.display, "display", lambda obj, raw=False: shown.append(obj)
    )
    monkeypatch.setenv(theme.BOOK_BUILD_ENV, "1")
    try:
        theme.choose_renderer()
        df = pd.DataFrame({"size_bytes": [4], "time_s": [1e-5], "world_size": [2]})
        cl.show(w.IntSlider(), cl.message_passing.chart.world_size_chart(df))
    finally:
        monkeypatch.delenv(theme.BOOK_BUILD_ENV)
        theme.choose_renderer()
    (bundle,) = shown
    assert cl.core.show.LIVE_NOTE in bundle["text/html"]
    assert "vegaEmbed(el," in bundle["text/html"]


def test_lean_spec_keeps_every_column_the_chart_reads():
    df = pd.DataFrame(
        {
            "x": [1.0, 2.0],
            "y a": [0.1 + 0.2, 3.0],
            "tip": ["a", "b"],
            "calc": [1, 2],
            "unused": ["p", "q"],
        }
    )
    chart = (
        alt.Chart(df)
        .mark_point()
        .transform_calculate(z="datum.calc * 2")
        .encode(x="x:Q", y=alt.Y("y a:Q"), size="z:Q", tooltip=["tip"])
    )
    spec = chart.to_dict()
    lean = theme.lean_spec(spec)
    (rows,) = lean["datasets"].values()
    assert set(rows[0]) == {"x", "y a", "tip", "calc"}
    assert rows[0]["y a"] == 0.3  # 0.30000000000000004 without the float noise
    (before,) = spec["datasets"].values()
    assert "unused" in before[0], "the input spec must not be modified"


def test_lean_spec_keeps_all_columns_when_a_tooltip_shows_all():
    df = pd.DataFrame({"x": [1], "other": [2]})
    spec = alt.Chart(df).mark_point(tooltip=True).encode(x="x:Q").to_dict()
    (rows,) = theme.lean_spec(spec)["datasets"].values()
    assert set(rows[0]) == {"x", "other"}


def test_the_vega_spec_draws_what_the_vega_lite_draws():
    import vl_convert

    df = pd.DataFrame({"x": [1, 2, 3], "y": [3, 1, 2], "unused": [0, 0, 0]})
    spec = alt.Chart(df).mark_line().encode(x="x:Q", y="y:Q").to_dict()
    vega = theme.vega_spec(theme.lean_spec(spec))
    assert vega["$schema"].endswith("vega/v5.json")
    assert vega["usermeta"]["embedOptions"]["actions"] is False
    assert vl_convert.vega_to_svg(vega) == vl_convert.vegalite_to_svg(spec)
