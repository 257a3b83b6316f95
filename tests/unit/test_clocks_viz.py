"""Clock charts (through their Vega-Lite specs) and Lab 02's widget."""

import json

import pandas as pd
import pytest

import clusterlab as cl
import widget_helpers as wh
from clusterlab.clocks.logical import LogicalParams, simulate_messages
from clusterlab.clocks.sim import ClockParams, simulate, skew, skew_sweep


@pytest.fixture(scope="module")
def runs():
    frames = [
        simulate(ClockParams(protocol=p, duration_s=600.0), seed=0)
        for p in ("none", "ntp", "ptp")
    ]
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def sweep():
    return skew_sweep(
        [1.0, 10.0, 100.0], [4.0, 16.0], base=ClockParams(duration_s=300.0), bins=6
    )


def _params(spec):
    found = list(spec.get("params", []))
    for layer in spec.get("layer", []):
        found += layer.get("params", [])
    return {p["name"]: p for p in found}


def test_clock_charts_have_titles_and_units(runs):
    charts = [
        cl.clocks.chart.clock_error_chart(runs[runs["protocol"] == "none"]),
        cl.clocks.chart.skew_chart(skew(runs)),
    ]
    for chart in charts:
        text = json.dumps(chart.to_dict())
        assert '"title"' in text and "(ms)" in text or "(s, log scale)" in text
        assert "(minutes)" in text


def test_the_skew_chart_marks_the_17_ms_of_claim_p2(runs):
    text = json.dumps(cl.clocks.chart.skew_chart(skew(runs)).to_dict())
    assert "17 ms" in text and "0.017" in text


def test_the_explorer_has_two_sliders_and_a_protocol_radio(sweep):
    spec = cl.clocks.chart.skew_explorer_chart(sweep).to_dict()
    params = _params(spec)
    assert params["log_drift"]["bind"]["input"] == "range"
    assert params["log_interval"]["bind"]["input"] == "range"
    assert params["log_drift"]["bind"]["step"] == pytest.approx(1.0)
    radio = [p for p in params.values() if p.get("bind", {}).get("input") == "radio"]
    assert radio and radio[0]["bind"]["options"] == ["none", "ntp", "ptp"]
    assert params["log_interval"]["value"] == pytest.approx(4.0)  # 2**4 = 16 s


def test_the_space_time_diagram_switches_clocks_with_a_radio():
    ev = simulate_messages(LogicalParams(clock_offsets_s=(0.0, -0.02, 0.01)), seed=1)
    spec = cl.clocks.spacetime.spacetime_chart(ev).to_dict()
    params = _params(spec)
    assert params["time_axis"]["bind"]["input"] == "radio"
    text = json.dumps(spec)
    assert "Lamport" in text and "vector" in text and "time (ms)" in text
    assert spec["height"] == 90 * 3


def test_charts_refuse_the_wrong_table():
    with pytest.raises(ValueError, match="lacks the column"):
        cl.clocks.chart.skew_chart(pd.DataFrame({"time_s": [0.0]}))
    with pytest.raises(ValueError, match="DataFrame"):
        cl.clocks.spacetime.spacetime_chart([1, 2])


@pytest.mark.timing
def test_the_widget_updates_quickly_at_its_defaults():
    box = cl.clocks.widget.clock_skew_explorer()
    drift = wh.control(box, "largest drift")
    best = min(
        wh.seconds(lambda v=value: setattr(drift, "value", v))
        for value in (20.0, 10.0, 30.0)
    )
    assert "largest skew" in wh.text(box)
    assert best < 1.0, f"an update took {best * 1e3:.0f} ms (target < 200 ms)"
    with pytest.raises(ValueError, match="base="):
        cl.clocks.widget.clock_skew_explorer(base={"protocol": "ntp"})


def test_every_widget_control_changes_the_chart_or_says_why_not(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, **kw: shown.append(obj))
    box = cl.clocks.widget.clock_skew_explorer(ClockParams(duration_s=900.0))

    def spec():
        return json.dumps(shown[-1].to_dict(), sort_keys=True)

    for name, value in [("largest drift", 30.0), ("sync interval", 64.0)]:
        before = spec()
        wh.control(box, name).value = value
        assert spec() != before, f"moving {name!r} left the chart as it was"
    before = spec()
    wh.control(box, "protocol").value = "ptp"
    assert spec() != before and "ptp" in wh.text(box)
    wh.control(box, "protocol").value = "none"
    before = spec()
    wh.control(box, "sync interval").value = 4.0
    assert spec() == before and "sync interval changes nothing" in wh.text(box)


def test_clock_charts_stay_small():
    free = ClockParams(
        n_nodes=2,
        drift_ppm=(30.0, -20.0),
        protocol="none",
        duration_s=600.0,
        sample_interval_s=1.0,
        wander_ppm_per_hour=0.0,
    )
    error_spec = json.dumps(
        cl.clocks.chart.clock_error_chart(simulate(free, seed=0)).to_dict()
    )
    assert len(error_spec) < 30_000
    sweep = skew_sweep(
        [1.0, 10.0, 100.0],
        [1.0, 4.0, 16.0, 64.0, 256.0],
        base=ClockParams(duration_s=300.0),
        bins=16,
    )
    spec = cl.clocks.chart.skew_explorer_chart(sweep).to_dict()
    assert len(json.dumps(spec)) < 30_000
    rows = next(iter(spec["datasets"].values()))
    assert len(rows) == 3 * 5 * 16 and {"none", "ntp", "ptp"} <= set(rows[0])
