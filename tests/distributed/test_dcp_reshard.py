"""An FSDP model and its AdamW state saved by DCP at 4 ranks, loaded at 3 and at 2."""

import pytest
import torch

import clusterlab as cl
from clusterlab.checkpointing import ranks

pytestmark = pytest.mark.dist


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("dcp4"))
    return folder, cl.launch(ranks.fsdp_save_worker, 4, folder=folder, mode="async")


@pytest.mark.parametrize("world", [3, 2])
def test_parameters_and_optimizer_state_load_equal_at_another_world_size(saved, world):
    folder, out = saved
    loaded = cl.launch(ranks.fsdp_load_worker, world, folder=folder)
    want, got = out[0]["full"], loaded[0]["full"]
    assert sorted(want) == sorted(got)
    assert any(k.startswith("optim.") and k.endswith("exp_avg_sq") for k in want)
    for key in want:
        assert torch.equal(want[key], got[key]), key
    assert sum(r["local_rows"] for r in loaded) == 48  # the first layer's rows, split


def test_every_rank_saved_the_same_whole_state(saved):
    _, out = saved
    for other in out[1:]:
        assert all(
            torch.equal(out[0]["full"][k], other["full"][k]) for k in out[0]["full"]
        )


def test_a_bad_mode_is_named(tmp_path):
    with pytest.raises(cl.core.supervisor.LaunchError, match="mode"):
        cl.launch(ranks.fsdp_save_worker, 1, folder=str(tmp_path), mode="later")
