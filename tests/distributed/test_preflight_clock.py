"""The preflight's clock exchange on real gloo groups, and its failure when stamped
before the receive completes (what a timestamp after an NCCL ``recv`` does)."""

import pytest
from workers import preflight_clock

import clusterlab as cl

pytestmark = pytest.mark.dist
SKEW_S = 0.25


def test_the_clock_exchange_finds_the_skew_within_its_bound():
    out = cl.launch(preflight_clock, 2, backend="gloo", skew_s=SKEW_S)
    offset, bound = out[0]["found"][1]
    assert abs(offset - SKEW_S) <= bound + 1e-9, (offset, bound)
    assert bound < 0.05 and out[1]["found"] == {}


def test_stamping_before_the_receive_completes_measures_nothing():
    """The same exchange with the stamps taken when each receive is posted: its
    delay comes out negative (refused) or its offset misses the skew."""
    out = cl.launch(
        preflight_clock, 2, backend="gloo", skew_s=SKEW_S, stamp_after_wait=False
    )
    if "error" in out[0]:
        assert "causal order" in out[0]["error"]
    else:
        offset, bound = out[0]["found"][1]
        assert abs(offset - SKEW_S) > bound, (offset, bound)
