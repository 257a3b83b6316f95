"""Charts and pages every reader can use: names, contrast, colour-blind palette.

The site test (``tests/test_site.py``) runs axe-core on every built page; these
tests hold the pieces it cannot see: the description each chart is named by,
the contrast of text drawn on marks, the palette as readers with deuteranopia
or protanopia see it, and the build-time mends of ``_ext/accessible_pages.py``.
Each check is also fed a planted violation and must catch it.
"""

import importlib.util
import itertools
import sys

import numpy as np
import pandas as pd
import pytest

from book_helpers import ROOT
from clusterlab.core import diagram
from clusterlab.core.theme import PALETTE, blend, book_html, contrast, describe, ink

# Machado, Oliveira & Fernandes (2009), "A physiologically-based model for
# simulation of color vision deficiency", severity 1.0, on linear RGB.
CVD = {
    "protanopia": np.array(
        [
            [0.152286, 1.052583, -0.204868],
            [0.114503, 0.786281, 0.099216],
            [-0.003882, -0.048116, 1.051998],
        ]
    ),
    "deuteranopia": np.array(
        [
            [0.367322, 0.860646, -0.227968],
            [0.280085, 0.672501, 0.047413],
            [-0.011820, 0.042940, 0.968881],
        ]
    ),
}

#: Two colours at least this far apart in CIELAB (Delta E 1976) are told apart
#: at a glance; about 2.3 is the least difference anyone notices.
MIN_DELTA_E = 15.0


def _linear(colour: str) -> np.ndarray:
    c = np.array([int(colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4)])
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _lab(linear_rgb: np.ndarray) -> np.ndarray:
    to_xyz = np.array(
        [[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]
    )
    xyz = to_xyz @ linear_rgb / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def closest_pair(colours, vision: str) -> tuple[float, str, str]:
    """The two ``colours`` nearest each other as a reader with ``vision`` sees
    them (``"normal"``, ``"protanopia"`` or ``"deuteranopia"``): (Delta E, a, b)."""
    m = CVD.get(vision, np.eye(3))
    seen = {c: _lab(np.clip(m @ _linear(c), 0, 1)) for c in colours}
    return min(
        (float(np.linalg.norm(seen[a] - seen[b])), a, b)
        for a, b in itertools.combinations(colours, 2)
    )


@pytest.mark.parametrize("vision", ["normal", "protanopia", "deuteranopia"])
def test_the_palette_stays_distinguishable_under_colour_blindness(vision):
    gap, a, b = closest_pair(PALETTE, vision)
    assert gap >= MIN_DELTA_E, f"{a} and {b} look alike with {vision} ({gap:.1f})"


def test_the_simulation_catches_a_red_green_pair():
    """The planted violation: red and green, apart for most readers, alike with
    deuteranopia."""
    pair = ["#FF0000", "#00A000"]
    assert closest_pair(pair, "normal")[0] > 50
    assert closest_pair(pair, "deuteranopia")[0] < MIN_DELTA_E


def test_contrast_is_the_wcag_ratio():
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)
    assert blend("#000000", 0.5) == "#808080"


def _diagram_colours():
    return sorted(set(PALETTE) | set(diagram.KIND_COLOURS.values()))


@pytest.mark.parametrize("fill", _diagram_colours())
def test_text_on_every_fill_has_a_contrast_of_4_5(fill):
    for opacity in (1.0, diagram.BOX_OPACITY):
        shown = blend(fill, opacity)
        assert contrast(ink(shown), shown) >= 4.5, (fill, opacity, ink(shown))


def test_white_text_on_orange_is_caught():
    """The planted violation: white on the palette's orange (lane labels were)."""
    assert contrast("#ffffff", PALETTE[1]) < 4.5
    assert ink(PALETTE[1]) != "#ffffff"


def _layers(chart):
    return chart.to_dict()["layer"]


def test_lane_labels_take_the_ink_of_their_bar():
    bars = pd.DataFrame(
        [
            {"lane": "r0", "start": 0, "end": 1, "kind": "compute", "label": "F"},
            {"lane": "r0", "start": 1, "end": 2, "kind": "checkpoint", "label": "C"},
        ]
    )
    bar, text = _layers(diagram.lane_diagram(bars, title="t", x_title="time (s)"))
    fills = dict(
        zip(
            *[bar["encoding"]["color"]["scale"][k] for k in ("domain", "range")],
            strict=True,
        )
    )
    inks = dict(
        zip(
            *[text["encoding"]["color"]["scale"][k] for k in ("domain", "range")],
            strict=True,
        )
    )
    for kind, fill in fills.items():
        assert contrast(inks[kind], fill) >= 4.5, kind


def test_arrows_are_hidden_from_assistive_technology_and_boxes_are_not():
    nodes = pd.DataFrame(
        [
            {"id": "a", "x": 0, "y": 0, "w": 2, "h": 1, "label": "A", "kind": "GPU"},
            {"id": "b", "x": 4, "y": 0, "w": 2, "h": 1, "label": "B", "kind": "NIC"},
        ]
    )
    links = pd.DataFrame([{"src": "a", "dst": "b", "label": "x", "kind": "link"}])
    layers = _layers(diagram.box_diagram(nodes, links, title="t"))
    marks = [layer["mark"] for layer in layers]
    hidden = [m["type"] for m in marks if m.get("aria") is False]
    assert sorted(hidden) == ["point", "rule"]
    assert all(m.get("aria") is not False for m in marks if m["type"] == "rect")


def test_every_chart_is_named_by_what_it_shows():
    spec = {"title": {"text": "Ring all-reduce", "subtitle": "Time grows with size."}}
    assert (
        describe(spec)["description"] == "Chart: Ring all-reduce. Time grows with size."
    )
    assert describe({"description": "Mine.", "title": "x"})["description"] == "Mine."
    out = book_html({**spec, "mark": "point"})
    assert 'role="figure" aria-label="Chart: Ring all-reduce. Time grows' in out
    assert "clusterlabChartData(el, spec," in out


def _extension():
    path = ROOT / "_ext" / "accessible_pages.py"
    spec = importlib.util.spec_from_file_location("accessible_pages", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("accessible_pages", module)
    spec.loader.exec_module(module)
    return module


SIDEBAR = """<ul><li class="toctree-l1 has-children"><a class="reference" href="a.html">
Time and order</a><details><summary><span class="toctree-toggle" role="presentation">
<i class="fa-solid fa-chevron-down"></i></span></summary><ul><li>x</li></ul>
</details></li>
<li class="has-children"><details><summary><p class="caption">Part I</p>
<span class="toctree-toggle"></span></summary></details></li></ul>"""


def test_the_sidebar_toggles_get_the_name_of_their_page():
    out = _extension().name_toggles(SIDEBAR)
    assert '<summary aria-label="Sections of Time and order">' in out
    assert out.count("aria-label") == 1  # the captioned summary keeps its text


def test_bibliography_entries_become_list_items():
    body = (
        '<div role="list" class="citation-list">'
        '<div class="citation" id="a" role="doc-biblioentry">'
    )
    out = _extension().list_bibliography(body)
    assert "doc-biblioentry" not in out and 'role="listitem"' in out


def _spec_with_layers():
    import altair as alt

    df = pd.DataFrame({"x": [0, 1, 0, 1], "y": [1, 2, 2, 3], "k": list("aabb")})
    base = alt.Chart(df).encode(x="x:Q", y="y:Q", color=alt.Color("k:N", title="kind"))
    return alt.layer(base.mark_line(), base.mark_point()).to_dict()


def test_no_category_is_told_by_colour_alone():
    from clusterlab.core.theme import colour_only_marks, second_channel

    spec = _spec_with_layers()
    # the planted violation: lines and points that differ by colour only
    assert len(colour_only_marks(spec)) == 2
    fixed = second_channel(spec)
    assert colour_only_marks(fixed) == []
    line, point = fixed["layer"]
    assert line["encoding"]["strokeDash"] == {
        "field": "k",
        "type": "nominal",
        "title": "kind",
    }
    assert point["encoding"]["shape"]["field"] == "k"
    assert colour_only_marks(spec), "second_channel must not modify its argument"


def test_every_renderer_draws_the_accessible_spec():
    import json

    from clusterlab.core import theme

    out = theme._book_renderer(_spec_with_layers())["text/html"]
    spec = json.loads(
        out.split("spec = ", 1)[1].split(";\n", 1)[0].replace("<\\/", "</")
    )
    assert theme.colour_only_marks(spec) == []
    assert spec["description"].startswith("Chart:")
