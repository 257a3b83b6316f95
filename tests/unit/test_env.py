import pytest

import clusterlab as cl


def test_smoke_is_the_default(monkeypatch):
    monkeypatch.delenv("CLUSTERLAB_SMOKE", raising=False)
    assert cl.core.env.is_smoke()
    assert cl.size(smoke=1, full=2) == 1


@pytest.mark.parametrize("raw", ["0", "false", "no", "OFF"])
def test_full_size_is_opt_in(monkeypatch, raw):
    monkeypatch.setenv("CLUSTERLAB_SMOKE", raw)
    assert not cl.core.env.is_smoke()
    assert cl.size(smoke=1, full=2) == 2


def test_a_garbled_size_switch_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("CLUSTERLAB_SMOKE", "maybe")
    with pytest.raises(ValueError, match="CLUSTERLAB_SMOKE='maybe'"):
        cl.core.env.is_smoke()


def test_setup_seeds_and_reports(capsys):
    import numpy as np
    import torch

    env = cl.setup(seed=7)
    first = (np.random.rand(), torch.rand(1).item())
    cl.setup(seed=7, quiet=True)
    assert (np.random.rand(), torch.rand(1).item()) == first
    out = capsys.readouterr().out
    assert "torch" in out and "SMOKE" in out and "seed 7" in out
    assert env.backend in {"gloo", "nccl"} and env.cpus >= 1


@pytest.mark.parametrize("seed", [-1, 2**32, 1.5, "0"])
def test_setup_rejects_bad_seeds(seed):
    with pytest.raises(ValueError, match="seed="):
        cl.setup(seed=seed, quiet=True)


def test_choose_backend_is_gloo_without_enough_gpus():
    import torch

    if torch.cuda.device_count() < 2:
        assert cl.core.backend.choose_backend(2, verbose=False) == "gloo"
    with pytest.raises(ValueError, match="world_size=0"):
        cl.core.backend.choose_backend(0)
