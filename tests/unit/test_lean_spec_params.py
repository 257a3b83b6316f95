"""A chart that filters rows on a param still draws once its spec is made lean."""

from __future__ import annotations

import pytest

from clusterlab.core.theme import lean_spec
from clusterlab.models.allreduce_sweeps import allreduce_model_sweep
from clusterlab.models.links import LINKS
from clusterlab.ring.chart import allreduce_algorithms_chart

vl_convert = pytest.importorskip("vl_convert")
from vega_helpers import data_marks  # noqa: E402 - after the skip


def _widget_case(alpha_s):
    link = LINKS["100GbE TCP"]
    df = allreduce_model_sweep(
        alphas_s=(alpha_s,), bandwidths_Bps=(link.per_direction_Bps,), log2_sizes=(28,)
    )
    return allreduce_algorithms_chart(df).to_dict()


@pytest.mark.parametrize("alpha_s", [LINKS["100GbE TCP"].alpha_s, 10**-4.5, 10**-6.25])
def test_the_explorer_draws_its_lines_at_any_slider_value(alpha_s):
    spec = lean_spec(_widget_case(alpha_s))
    scene = vl_convert.vegalite_to_scenegraph(spec)["scenegraph"]
    assert data_marks(scene) > 0, "the chart drew no data marks"


def test_params_and_their_options_are_rounded_like_the_data():
    spec = lean_spec(_widget_case(10**-4.5))
    params = {p["name"]: p for p in spec["params"]}
    value = params["alpha_us"]["value"]
    data = next(iter(spec["datasets"].values()))
    assert value in {row["alpha_us"] for row in data}
    assert params["alpha_us"]["bind"]["options"] == [value]


def test_a_param_left_unrounded_draws_nothing():
    """The failure the rounding prevents: the filter matches no row."""
    spec = lean_spec(_widget_case(10**-4.5))
    spec["params"] = [
        {**p, "value": 10**-4.5 * 1e6} if p["name"] == "alpha_us" else p
        for p in spec["params"]
    ]
    scene = vl_convert.vegalite_to_scenegraph(spec)["scenegraph"]
    assert data_marks(scene) == 0
