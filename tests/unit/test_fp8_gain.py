"""The planner's end-to-end fp8 gain against torchtitan's published bf16/fp8 pair."""

import math

import pytest

import clusterlab as cl
from clusterlab.models import fp8_gain
from clusterlab.planner.check import fp8_gain_agrees

EIGHT = "torchtitan Llama 3.1 8B, FSDP on 8 H100"


@pytest.fixture(scope="module")
def table():
    return fp8_gain.fp8_gain_table()


def _wrong(**fp8_overrides):
    return fp8_gain.fp8_gain_table(fp8_overrides=fp8_overrides)


def test_the_published_pairs_are_read_as_printed():
    runs = fp8_gain.published_runs().set_index("run")
    assert runs.loc[EIGHT, "published_gain"] == pytest.approx(8532 / 6667)
    big = "torchtitan Llama 3.1 8B, FSDP on 128 H100"
    assert runs.loc[big, "published_gain"] == pytest.approx(8380 / 6514)
    # 16 sequences of 8192 tokens over 8 GPUs at 6,667 tokens/s per GPU
    step_s = runs.loc[EIGHT, "published_bf16_step_s"]
    assert step_s == pytest.approx(16 * 8192 / 8 / 6667)
    rows = cl.published.load(fp8_gain.TABLE)
    assert set(rows["precision"]) == {"bf16", "fp8"} and len(rows) == 4
    assert rows["source"].str.contains("torchtitan").all()


def test_each_layout_is_priced_as_published(table):
    row = fp8_gain.published_runs().attrs["rows"][EIGHT]
    plan = fp8_gain.run_plan(row)
    assert (plan["tp"], plan["pp"], plan["cp"], plan["dp"]) == (1, 1, 1, 8)
    assert plan["zero_stage"] == 3 and plan["micro_batch"] == 2
    shape = fp8_gain.run_shape(row)
    assert (shape.n_layers, shape.hidden, shape.n_kv_heads) == (32, 4096, 8)
    assert shape.seq_len == 8192 and shape.ffn_hidden == 14336


def test_the_planner_overstates_the_gain_on_8_gpus_and_the_check_says_so(table):
    t = table.set_index("run")
    assert t.loc[EIGHT, "model_gain"] > t.loc[EIGHT, "published_gain"] * 1.1
    # its bf16 step is about half the measured one: what it leaves out
    assert 0.4 < t.loc[EIGHT, "model_bf16_share"] < 0.7
    with pytest.raises(AssertionError, match="leaves out"):
        fp8_gain_agrees(table)


def test_fp8_doubling_every_flop_fails():
    peak = cl.models.precision.peak_flops("H100 SXM5", "bf16")
    naive = _wrong(precision="bf16", peak_flops=2 * peak)
    assert naive.set_index("run").loc[EIGHT, "model_gain"] == pytest.approx(2.0)
    with pytest.raises(AssertionError, match="near 2x"):
        fp8_gain_agrees(naive)


def test_fp8_buying_nothing_fails():
    none = _wrong(precision="bf16")
    assert (none["model_gain"] == 1.0).all()
    with pytest.raises(AssertionError, match="no gain"):
        fp8_gain_agrees(none)


def test_the_left_out_work_sized_from_bf16_brings_the_gain_within_tolerance(table):
    # the rest of the measured bf16 step reproduces it exactly...
    for _, r in table.iterrows():
        row = fp8_gain.published_runs().attrs["rows"][r["run"]]
        shape, plan = fp8_gain.run_shape(row), fp8_gain.run_plan(row)
        got = cl.models.planner5d.plan5d_row(
            shape, **plan, other_compute_s=r["other_compute_s"]
        )
        assert got["step_s"] == pytest.approx(r["published_bf16_step_s"], rel=1e-9)
    # ...and held fixed in fp8 it predicts the fp8 gain within the tolerance
    out = fp8_gain_agrees(table, column="gain_with_other")
    assert all(abs(v["off"]) <= fp8_gain.GAIN_TOLERANCE for v in out.values())
    assert (table["gain_with_other"] < table["published_gain"]).all()


def test_with_the_left_out_work_fixed_the_gain_hardly_depends_on_fp8s_pricing():
    # So that column explains the planner's gap; it does not test fp8's pricing.
    peak = cl.models.precision.peak_flops("H100 SXM5", "bf16")
    naive = _wrong(precision="bf16", peak_flops=2 * peak)
    fp8_gain_agrees(naive, column="gain_with_other")


def test_the_tolerance_separates_the_published_gain_from_both_wrong_models(table):
    tol = fp8_gain.GAIN_TOLERANCE
    for pub in table["published_gain"]:
        assert 1.0 < pub * (1 - 2 * tol) and pub * (1 + 2 * tol) < 2.0


def test_the_check_refuses_bad_input(table):
    with pytest.raises(ValueError, match="lacks"):
        fp8_gain_agrees(table.drop(columns="published_gain"))
    with pytest.raises(ValueError, match="tolerance"):
        fp8_gain_agrees(table, tolerance=0.0)
    with pytest.raises(ValueError, match="no run"):
        fp8_gain_agrees(table.iloc[:0])
    ok = table.assign(model_gain=table["published_gain"] * 1.05)
    assert set(fp8_gain_agrees(ok)) == set(table["run"])


def test_other_compute_s_adds_to_compute_and_is_checked():
    shape = fp8_gain.run_shape(fp8_gain.published_runs().attrs["rows"][EIGHT])
    plan = fp8_gain.run_plan(fp8_gain.published_runs().attrs["rows"][EIGHT])
    base = cl.models.planner5d.plan5d_row(shape, **plan)
    more = cl.models.planner5d.plan5d_row(shape, **plan, other_compute_s=0.5)
    assert more["compute_s"] == pytest.approx(base["compute_s"] + 0.5)
    assert math.isclose(more["step_s"], base["step_s"] + 0.5)
    with pytest.raises(ValueError, match="other_compute_s"):
        cl.models.planner5d.plan5d_row(shape, **plan, other_compute_s=-1.0)
