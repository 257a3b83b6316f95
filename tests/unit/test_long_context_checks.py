"""Zig-zag's balance decided on measured time, not only on counted work."""

import pytest


def test_zigzag_must_be_faster_in_time_not_only_in_counts():
    from clusterlab.long_context.check import zigzag_balances_time

    counts_c, counts_z = [256, 512, 768, 1024], [576] * 4
    measured_c, measured_z = [0.034, 0.058, 0.089, 0.104], [0.034, 0.035, 0.034, 0.035]
    got = zigzag_balances_time(measured_c, measured_z, counts_c, counts_z)
    assert got["time_ratio"] == pytest.approx(0.104 / 0.035)
    # a layout that balances nothing: zig-zag's counts, contiguous's times
    with pytest.raises(AssertionError, match="at least 1.39x"):
        zigzag_balances_time(measured_c, measured_c, counts_c, counts_z)
    with pytest.raises(AssertionError, match="same time on every rank"):
        zigzag_balances_time([0.1] * 4, [0.05] * 4, counts_c, counts_z)
    with pytest.raises(ValueError, match="one entry per rank"):
        zigzag_balances_time(measured_c[:3], measured_z, counts_c, counts_z)
    with pytest.raises(ValueError, match="share"):
        zigzag_balances_time(measured_c, measured_z, counts_c, counts_z, share=0)
