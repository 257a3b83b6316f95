"""The FSDP peak model: its terms, and what resharding and prefetch change."""

import pytest

from clusterlab.models.fsdp_memory import fsdp_peak_bytes

P, A = 1000, 500


def test_resharding_holds_a_few_layers_and_no_resharding_holds_them_all():
    on = fsdp_peak_bytes(6, P, A, 2, prefetch=False)
    off = fsdp_peak_bytes(6, P, A, 2, reshard_after_forward=False, prefetch=False)
    # with resharding the peak is flat in k; the first maximum is at k = 1
    assert on["rise"] == 7 * A + P / 2 + 3 * P
    assert off["rise"] == 8 * A + 7 * P
    assert off["at_layer"] == 0


def test_prefetch_adds_one_layer_only_with_resharding():
    base = fsdp_peak_bytes(6, P, A, 2, prefetch=False)["rise"]
    assert fsdp_peak_bytes(6, P, A, 2, prefetch=True)["rise"] == base + P
    kw = dict(reshard_after_forward=False)
    off = [fsdp_peak_bytes(6, P, A, 2, prefetch=f, **kw)["rise"] for f in (0, 1)]
    assert off[0] == off[1]


def test_the_state_is_weights_and_adam_over_the_ranks():
    out = fsdp_peak_bytes(4, P, A, 4)
    assert out["state"] == 3 * 4 * P / 4
    assert out["peak"] == out["state"] + out["rise"]


def test_leaving_out_activations_lowers_the_rise():
    with_acts = fsdp_peak_bytes(6, P, A, 2)["rise"]
    assert fsdp_peak_bytes(6, P, A, 2, activations=False)["rise"] < with_acts


def test_bad_inputs_name_themselves():
    with pytest.raises(ValueError, match="n_layers=0"):
        fsdp_peak_bytes(0, P, A, 2)
    with pytest.raises(ValueError, match="world_size=0"):
        fsdp_peak_bytes(2, P, A, 0)
