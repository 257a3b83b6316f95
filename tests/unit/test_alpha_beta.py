import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import clusterlab as cl
from clusterlab.models.collectives import alpha_beta_time


def test_model_is_latency_plus_size_over_bandwidth():
    assert alpha_beta_time(0, 1e-5, 1e9) == pytest.approx(1e-5)
    assert alpha_beta_time(1e9, 1e-5, 1e9) == pytest.approx(1.00001)
    np.testing.assert_allclose(alpha_beta_time([0, 2e9], 0.0, 2e9), [0.0, 1.0])


@given(alpha=st.floats(1e-7, 1e-2), log_beta=st.floats(6, 12))
def test_fit_recovers_exact_parameters(alpha, log_beta):
    beta = 10**log_beta
    sizes = np.geomspace(4, 2**26, 12)
    a, b = cl.core.alpha_beta.fit_alpha_beta(sizes, alpha_beta_time(sizes, alpha, beta))
    assert a == pytest.approx(alpha, rel=1e-6, abs=1e-12)
    assert b == pytest.approx(beta, rel=1e-6)


def test_fit_weights_relative_error_so_alpha_survives_large_messages():
    sizes = np.array([4, 64, 1024, 2**20, 2**26])
    times = alpha_beta_time(sizes, 2e-5, 1e9) * np.array([1.0, 1.0, 1.0, 1.0, 1.3])
    alpha, _ = cl.core.alpha_beta.fit_alpha_beta(sizes, times)
    assert alpha == pytest.approx(2e-5, rel=0.1)


def test_fit_never_returns_negative_latency_or_bandwidth():
    alpha, beta = cl.core.alpha_beta.fit_alpha_beta([1, 2, 3], [1.0, 2.1, 3.3])
    assert alpha >= 0 and beta > 0
    alpha, beta = cl.core.alpha_beta.fit_alpha_beta([1, 2, 3], [3.0, 2.0, 1.0])
    assert beta == math.inf and alpha > 0


@pytest.mark.parametrize(
    ("sizes", "times", "needle"),
    [
        ([1, 2], [1.0], "same length"),
        ([4, 4], [1.0, 1.0], "at least 2 distinct"),
        ([4, -8], [1.0, 1.0], "sizes must hold finite values > 0"),
        ([4, 8], [1.0, 0.0], "times must hold finite values > 0"),
        ([4, 8], [1.0, float("nan")], "times must hold"),
        ([[4, 8]], [[1.0, 2.0]], "one-dimensional"),
        ("abc", [1.0], "sizes="),
    ],
)
def test_fit_rejects_bad_input_with_a_named_argument(sizes, times, needle):
    with pytest.raises(ValueError, match=needle):
        cl.core.alpha_beta.fit_alpha_beta(sizes, times)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ((-1, 0.0, 1.0), "nbytes"),
        ((1, -1.0, 1.0), "alpha_s=-1.0"),
        ((1, 0.0, 0.0), "beta_Bps=0.0"),
        ((1, 0.0, "x"), "beta_Bps='x'"),
    ],
)
def test_model_rejects_bad_input(args, needle):
    with pytest.raises(ValueError, match=needle):
        alpha_beta_time(*args)
