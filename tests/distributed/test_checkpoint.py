"""Distributed checkpoints (DCP): sharded save and load, resharding, resume."""

import tempfile

import pytest
import torch

import clusterlab as cl
from clusterlab.checkpointing import ranks as checkpointing
from clusterlab.failures import resume as crash_resume

pytestmark = [pytest.mark.dist]


@pytest.mark.parametrize("save_ranks, load_ranks", [(2, 2), (2, 3), (4, 2)])
def test_dcp_round_trip_is_equal_even_on_another_world_size(save_ranks, load_ranks):
    folder = tempfile.mkdtemp()
    saved = cl.launch(checkpointing.dcp_save_worker, save_ranks, folder=folder)
    assert [s["local_shape"] for s in saved] == [(12 // save_ranks, 4)] * save_ranks
    files = checkpointing.checkpoint_files(folder)
    assert ".metadata" in files
    assert sum(name.endswith(".distcp") for name in files) == save_ranks
    loaded = cl.launch(checkpointing.dcp_load_worker, load_ranks, folder=folder)
    want = checkpointing.sharded_table(12, 4)
    for r in loaded:
        assert torch.equal(r["table"], want)
        assert r["step"] == 42
        assert r["local_shape"] == (12 // load_ranks, 4)


def test_a_wrong_checkpoint_would_be_caught():
    """Loading into a table of the wrong shape fails instead of passing silently."""
    folder = tempfile.mkdtemp()
    cl.launch(checkpointing.dcp_save_worker, 2, folder=folder)
    with pytest.raises(cl.core.supervisor.LaunchError):
        cl.launch(checkpointing.dcp_load_worker, 2, folder=folder, rows=8)


def test_dcp_crash_and_resume_equals_an_uninterrupted_run():
    ref = cl.launch(
        crash_resume.train, 2, steps=12, every=4, ckpt_dir=tempfile.mkdtemp()
    )
    ckpt = tempfile.mkdtemp()
    with pytest.raises(cl.core.supervisor.LaunchError):
        cl.launch(
            crash_resume.train,
            2,
            steps=12,
            every=4,
            ckpt_dir=ckpt,
            crash_at=6,
            fmt="dcp",
        )
    out = cl.launch(
        crash_resume.train, 2, steps=12, every=4, ckpt_dir=ckpt, attempt=1, fmt="dcp"
    )
    assert out[0]["start_step"] == 4
    assert torch.equal(out[0]["weights"], ref[0]["weights"])
