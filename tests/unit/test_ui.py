"""The live/static display: a widget view for kernels, HTML for the book."""

import pandas as pd
import pytest

import clusterlab as cl
from clusterlab.core.show import WIDGET_VIEW


def test_show_sends_the_widget_and_its_note_in_one_bundle(monkeypatch):
    import IPython.display
    import ipywidgets as w

    shown = []
    monkeypatch.setattr(
        IPython.display, "display", lambda obj, raw=False: shown.append((obj, raw))
    )
    df = pd.DataFrame(
        {"size_bytes": [4, 1024], "time_s": [1e-5, 2e-5], "world_size": [2, 2]}
    )
    slider = w.IntSlider()
    cl.show(slider, cl.message_passing.chart.world_size_chart(df))
    ((bundle, raw),) = shown
    assert raw
    assert bundle[WIDGET_VIEW]["model_id"] == slider.model_id
    # local Jupyter never shows the twin beside a live widget: only the note
    assert cl.core.show.LIVE_NOTE in bundle["text/plain"]
    assert "text/html" not in bundle


def test_show_refuses_something_that_is_not_a_widget():
    with pytest.raises(ValueError, match="not an ipywidgets widget"):
        cl.show(object(), None)


def test_the_lab01_widget_is_built_from_defaults():
    df = pd.DataFrame(
        {"size_bytes": [4, 1024], "time_s": [1e-5, 2e-5], "world_size": [2, 2]}
    )
    box = cl.message_passing.widget.message_size_explorer(df)
    assert len(box.children) == 3
    with pytest.raises(ValueError, match="max_world_size=9"):
        cl.message_passing.widget.message_size_explorer(df, max_world_size=9)
