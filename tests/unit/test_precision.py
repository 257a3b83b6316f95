"""Precision: formats, peaks, loss scaling, FP8 matmul error and all-gather bytes."""

import math

import pytest
import torch

import clusterlab as cl
from clusterlab.models import precision as mp
from clusterlab.precision import check as chk
from clusterlab.precision import measure as pp
from clusterlab.precision.answer import per_tensor_scale


def test_bytes_per_value():
    got = [mp.bytes_per_value(p) for p in ("fp32", "bf16", "fp16", "fp8")]
    assert got == [4.0, 2.0, 2.0, 1.0]
    with pytest.raises(ValueError, match="precision='int4'"):
        mp.bytes_per_value("int4")


def test_fp8_peak_is_twice_bf16_on_hopper_and_absent_on_a100():
    for gpu in ("H100 SXM5", "H100 PCIe", "H200 SXM"):
        ratio = mp.peak_flops(gpu, "fp8") / mp.peak_flops(gpu, "bf16")
        assert ratio == pytest.approx(2.0, rel=1e-3)
        assert mp.peak_flops(gpu, "fp16") == mp.peak_flops(gpu, "bf16")
        assert mp.peak_flops(gpu, "fp32") < mp.peak_flops(gpu, "bf16") / 10
    assert mp.peak_flops("H100 SXM5", "fp8") == 1.979e15  # the datasheet's, halved
    with pytest.raises(ValueError, match="gpu='A100 SXM4 80GB'"):
        mp.peak_flops("A100 SXM4 80GB", "fp8")
    with pytest.raises(ValueError, match="gpu='Z100'"):
        mp.peak_flops("Z100", "bf16")  # no such part
    # a next-generation row whose sources give no peak leaves it empty
    with pytest.raises(ValueError, match="gpu='B300' has no published bf16"):
        mp.peak_flops("B300", "bf16")
    assert mp.peak_flops("B200", "fp8") == 2 * mp.peak_flops("B200", "bf16")


def test_format_table_has_the_formats_ranges():
    t = mp.format_table().set_index("format")
    assert t.at["fp16", "max_value"] == 65504
    assert t.at["fp8_e4m3", "max_value"] == 448
    assert t.at["fp8_e5m2", "max_value"] == 57344
    assert (t.exponent_bits + t.mantissa_bits + 1 == t.bits).all()
    assert t.at["bf16", "exponent_bits"] == t.at["fp32", "exponent_bits"]


def test_underflow_share_and_matmul_model():
    assert mp.underflow_share([1e-8, 1e-7, 1.0], "fp16") == pytest.approx(1 / 3)
    assert mp.underflow_share([1e-8, 1e-7, 1.0], "bf16") == 0
    assert mp.underflow_share([1e-8], "fp16", scale=2.0**16) == 0
    e = mp.matmul_relative_error("fp8_e4m3")
    assert e == pytest.approx(math.sqrt(2) * mp.ROUNDING_RMS_PER_EPS / 8, rel=0.01)
    with pytest.raises(ValueError, match="scale=0"):
        mp.underflow_share([1.0], "fp16", scale=0)


def test_allgather_bytes():
    assert mp.allgather_bytes(1024, "bf16", 4) == 3 * 256 * 2
    assert mp.allgather_bytes(1024, "fp8", 2) == 512 + 4
    with pytest.raises(ValueError, match="world_size=1"):
        mp.allgather_bytes(1024, "fp8", 1)


@pytest.fixture(scope="module")
def runs():
    torch.set_num_threads(1)
    return {
        "bf16": pp.mixed_precision_run("bf16", steps=4),
        "fp16": pp.mixed_precision_run("fp16", steps=4),
        "fp16 scaled": pp.mixed_precision_run("fp16", 2.0**16, steps=4),
    }


def test_loss_scaling_rescues_fp16(runs):
    table = chk.check_loss_scaling(runs)
    assert (table.verdict == "fits").all()


def test_loss_scaling_check_fails_when_the_scale_is_left_out(runs):
    wrong = {**runs, "fp16 scaled": runs["fp16"]}
    with pytest.raises(AssertionError, match="fp16 scaled"):
        chk.check_loss_scaling(wrong)


def test_underflow_matches_the_subnormal_and_fails_when_the_format_is_wrong(runs):
    g = pp.loss_gradient()
    measured = runs["fp16"].zero_grad_share.iloc[0]
    chk.check_underflow(measured, mp.underflow_share(g, "fp16"))
    with pytest.raises(AssertionError, match="off by more"):
        chk.check_underflow(measured, mp.underflow_share(g, "bf16"))


def test_dynamic_scaling_halves_after_an_overflow():
    run = pp.mixed_precision_run("fp16", 2.0**40, dynamic=True, steps=3)
    assert run.overflow.iloc[0]
    assert run.scale.iloc[1] == 2.0**39


def test_fp8_error_fits_the_rounding_model():
    table = pp.error_table(n=64)
    chk.check_fp8_error(table, mp.matmul_relative_error)


def test_fp8_error_check_fails_when_the_model_uses_the_wrong_format():
    table = pp.error_table(n=64)

    def swapped(fmt):  # e4m3 and e5m2's mantissas swapped: a 2x wrong model
        other = {"fp8_e4m3": "fp8_e5m2", "fp8_e5m2": "fp8_e4m3"}.get(fmt, fmt)
        return mp.matmul_relative_error(other)

    with pytest.raises(AssertionError, match="outside"):
        chk.check_fp8_error(table, swapped)


def test_unscaled_fp8_loses_small_values():
    got = pp.fp8_matmul_error(64, "fp8_e4m3", spread=1e-3)
    assert got["fp8_e4m3_unscaled"] > 10 * got["fp8_e4m3"]
    with pytest.raises(ValueError, match="n=40"):
        pp.fp8_matmul_error(40)


def test_per_tensor_scale_check(capsys):
    assert cl.precision.check.per_tensor_scale(per_tensor_scale)

    def inverted(t, fmt):
        return torch.finfo(fmt).max / t.abs().max().item()

    with pytest.raises(AssertionError, match="1 / s"):
        cl.precision.check.per_tensor_scale(inverted)

    def e4m3_only(t, fmt):
        return t.abs().max().item() / 448.0

    with pytest.raises(AssertionError, match="57344"):
        cl.precision.check.per_tensor_scale(e4m3_only)


def test_loss_scale_chart_and_widget():
    ranges = mp.format_ranges()
    hist = mp.log2_histogram(pp.loss_gradient())
    spec = cl.precision.chart.loss_scale_chart(ranges, hist).to_dict()
    assert spec["params"][0]["name"] == "log2_scale"  # the page's slider
    with pytest.raises(ValueError, match="log2_scale=41"):
        cl.precision.chart.loss_scale_chart(ranges, hist, log2_scale=41)
    box = cl.precision.widget.loss_scale_widget(pp.loss_gradient(), log2_scale=16)
    assert "fp16 rounds" in box.children[1].value
