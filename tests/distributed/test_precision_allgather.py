"""An FP8 all-gather of weights on real gloo ranks: a quarter of fp32's bytes."""

import clusterlab as cl
from clusterlab.models.precision import allgather_bytes
from clusterlab.precision.measure import fp8_allgather_worker


def test_fp8_allgather_moves_the_predicted_bytes_with_a_small_error():
    n = 1 << 12
    res = cl.launch(fp8_allgather_worker, 2, timeout=30, n_values=n)
    for per_rank in res:
        by = {r["precision"]: r for r in per_rank}
        for p, row in by.items():
            assert row["received_bytes"] == allgather_bytes(n, p, 2), p
        assert by["fp32"]["relative_error"] == 0
        assert by["bf16"]["relative_error"] < 0.005  # 8 significant bits
        assert 0.005 < by["fp8"]["relative_error"] < 0.05  # 4 significant bits
