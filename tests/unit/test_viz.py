"""Chart builders, tested through the Vega-Lite spec they produce."""

import json

import pandas as pd
import pytest

import clusterlab as cl
from clusterlab.core.theme import PALETTE, book_html


@pytest.fixture
def measured():
    sizes = [4, 64, 1024, 2**16, 2**20]
    rows = []
    for n in (2, 3):
        for s in sizes:
            t = 2e-5 * n + s / 2e9
            rows.append(
                {
                    "op": "all_reduce",
                    "size_bytes": s,
                    "world_size": n,
                    "time_s": t,
                    "algbw_Bps": s / t,
                    "busbw_Bps": s / t,
                }
            )
    return pd.DataFrame(rows)


def test_every_chart_has_a_title_and_units_on_its_axes(measured):
    charts = [
        cl.message_passing.chart.message_time_chart(
            measured, alpha_s=2e-5, beta_Bps=2e9
        ),
        cl.message_passing.chart.bandwidth_chart(measured),
        cl.message_passing.chart.alpha_beta_explorer(measured, 2e-5, 2e9),
        cl.message_passing.chart.world_size_chart(measured),
    ]
    for chart in charts:
        spec = chart.to_dict()
        assert spec.get("title"), spec
        text = json.dumps(spec)
        assert "(bytes" in text and ("(s" in text or "(GB/s)" in text)


def test_theme_uses_the_colour_blind_safe_palette(measured):
    spec = cl.message_passing.chart.bandwidth_chart(measured).to_dict()
    assert spec["config"]["range"]["category"] == PALETTE


def test_explorer_sliders_are_vega_lite_params(measured):
    spec = cl.message_passing.chart.alpha_beta_explorer(measured, 2e-5, 2e9).to_dict()
    params = {p["name"]: p for p in spec["params"]}
    assert params["log_alpha"]["bind"]["input"] == "range"
    assert params["log_beta"]["value"] == pytest.approx(9.3, abs=0.01)
    assert "pow(10, log_alpha)" in json.dumps(spec)


def test_world_size_chart_binds_a_radio_selection(measured):
    spec = cl.message_passing.chart.world_size_chart(measured).to_dict()
    text = json.dumps(spec)
    assert '"input": "radio"' in text and '"options": [2, 3]' in text


def test_missing_columns_are_a_clear_error(measured):
    with pytest.raises(ValueError, match="lacks the column"):
        cl.message_passing.chart.message_time_chart(measured.drop(columns="time_s"))
    with pytest.raises(ValueError, match="DataFrame"):
        cl.message_passing.chart.bandwidth_chart([1, 2])


def test_book_html_calls_the_local_vega_embed_and_escapes_the_spec():
    out = book_html({"title": "a </script> title", "mark": "point"})
    assert "vegaEmbed(el," in out and "<\\/script>" in out
    assert "http" not in out.split("<script>")[1]


def test_model_curve_spans_the_measured_sizes():
    curve = cl.message_passing.chart.model_curve(1e-5, 1e9, 4, 2**20, points=10)
    assert curve["size_bytes"].iloc[0] == pytest.approx(4)
    assert curve["size_bytes"].iloc[-1] == pytest.approx(2**20)
    assert curve["time_s"].is_monotonic_increasing


def test_offline_html_carries_the_bundle_without_breaking_it():
    bundle = "var r = /</g; var s = '</script>'; window.vegaEmbed = function () {};"
    out = book_html({"mark": "point"}, bundle=bundle)
    assert "var r = /</g;" in out  # a regular expression must survive intact
    assert "</script>'" not in out and "<\\/script>'" in out
    assert out.count("</script>") == 1  # only the element's own end tag


def test_the_renderer_follows_where_charts_are_shown(monkeypatch):
    import altair as alt

    from clusterlab.core.theme import BOOK_BUILD_ENV, choose_renderer

    monkeypatch.setenv(BOOK_BUILD_ENV, "1")
    assert choose_renderer() == "clusterlab_book"
    monkeypatch.delenv(BOOK_BUILD_ENV)
    assert choose_renderer() == "clusterlab_offline"  # vl-convert is installed here
    html = cl.core.theme.chart_html(alt.Chart(pd.DataFrame({"x": [1]})).mark_point())
    assert "cdn.jsdelivr" not in html and "window.vegaEmbed" in html
