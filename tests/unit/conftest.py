"""Unit tests start no ranks: ``make unit`` and ``make check`` stay fast and quiet.

A test here that starts a process group (through ``cl.launch``, multiprocessing
or ``torchrun``) fails with a message saying to move it to ``tests/distributed``.
"""

import multiprocessing.context as mp_context
import subprocess

import pytest

_RANKS = "unit tests start no ranks: move this test to tests/distributed"


def _refuse_start(self):
    raise RuntimeError(f"{_RANKS} (it started a {type(self).__name__})")


@pytest.fixture(autouse=True)
def _no_ranks(monkeypatch):
    for name in ("ForkProcess", "SpawnProcess", "ForkServerProcess"):
        cls = getattr(mp_context, name, None)
        if cls is not None:
            monkeypatch.setattr(cls, "start", _refuse_start)
    real_init = subprocess.Popen.__init__

    def init(self, args, *a, **kw):
        words = (
            " ".join(map(str, args)) if isinstance(args, (list, tuple)) else str(args)
        )
        if "torchrun" in str(words) or "torch.distributed.run" in str(words):
            raise RuntimeError(f"{_RANKS} (it ran torchrun)")
        real_init(self, args, *a, **kw)

    monkeypatch.setattr(subprocess.Popen, "__init__", init)
