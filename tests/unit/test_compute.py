import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterlab.models.compute import (
    H100_SXM,
    LLAMA2_70B,
    flops_per_token,
    mfu_from_throughput,
    tokens_per_s_at_mfu,
    training_time,
)

DAY_S = 86400.0


def test_six_n_rule_and_palm_attention_term():
    assert flops_per_token(7e9) == 42e9
    # 6N + 12 L h s for Llama 2 70B: 4.2e11 + 12 * 80 * 8192 * 4096.
    m = LLAMA2_70B
    got = flops_per_token(m.n_params, m.n_layers, m.hidden, m.seq_len)
    assert got == pytest.approx(4.2e11 + 3.221225472e10)


def test_training_time_hand_computed():
    # 6 * 70e9 * 2e12 = 8.4e23 FLOP on 1024 GPUs at 989.4 TFLOP/s and 40% MFU.
    t = training_time(70e9, 2e12, 1024, 989.4e12, 0.4)
    assert t == pytest.approx(8.4e23 / (1024 * 989.4e12 * 0.4))
    assert 23 < t / DAY_S < 24


def test_llama2_gpu_hours_imply_a_plausible_mfu():
    # Touvron et al. 2023: 1,720,320 A100 GPU-hours for 70B on 2.0T tokens.
    # At the A100's 312 TFLOP/s dense BF16 that is about 43% MFU.
    gpu_s = 1_720_320 * 3600.0
    mfu = 6 * 70e9 * 2e12 / (gpu_s * 312e12)
    assert 0.40 < mfu < 0.46
    assert training_time(70e9, 2e12, 1, 312e12, mfu) == pytest.approx(gpu_s)


def test_mfu_of_the_quoted_70b_throughput():
    # 6N-only MFU (no shape given), then the book's MFU with 12 L h s added.
    six_n = mfu_from_throughput(150e3, 70e9, 1024, H100_SXM.peak_flops)
    assert six_n == pytest.approx(150e3 * 4.2e11 / (1024 * 989.4e12))
    m = LLAMA2_70B
    book = mfu_from_throughput(
        150e3, m.n_params, 1024, H100_SXM.peak_flops,
        n_layers=m.n_layers, hidden=m.hidden, seq_len=m.seq_len,
    )  # fmt: skip
    assert book == pytest.approx(six_n * (4.2e11 + 3.221225472e10) / 4.2e11)
    assert 0.06 < six_n < book < 0.07


def test_the_gpu_spec_is_read_from_data():
    from clusterlab.models.compute import gpu_spec

    assert H100_SXM.peak_flops == 989.4e12 and H100_SXM.memory_bytes == 80e9
    assert gpu_spec("H200 SXM").memory_bytes > H100_SXM.memory_bytes
    with pytest.raises(ValueError, match="H900"):
        gpu_spec("H900")


@given(
    n=st.floats(1e8, 1e12),
    d=st.floats(1e9, 1e13),
    g=st.integers(1, 4096),
    mfu=st.floats(0.01, 1.0),
)
def test_more_gpus_never_lengthen_ideal_training_time(n, d, g, mfu):
    t1 = training_time(n, d, g, H100_SXM.peak_flops, mfu)
    t2 = training_time(n, d, g + 1, H100_SXM.peak_flops, mfu)
    assert t2 <= t1


@given(n=st.floats(1e8, 1e12), g=st.integers(1, 4096), mfu=st.floats(0.01, 1.0))
def test_mfu_and_throughput_are_inverses(n, g, mfu):
    rate = tokens_per_s_at_mfu(n, g, 989e12, mfu)
    assert mfu_from_throughput(rate, n, g, 989e12) == pytest.approx(mfu)


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda: training_time(7e9, 1e12, 0, 1e15, 0.4), "n_gpus"),
        (lambda: training_time(7e9, 1e12, 8, 1e15, 1.5), "mfu"),
        (lambda: training_time(7e9, 0, 8, 1e15, 0.4), "n_tokens"),
        (lambda: flops_per_token(7e9, n_layers=32), "seq_len"),
        (lambda: mfu_from_throughput(-1, 7e9, 8, 1e15), "tokens_per_s"),
    ],
)
def test_bad_arguments_name_themselves(call, word):
    with pytest.raises(ValueError, match=word):
        call()
