"""The lab environment: sizes (SMOKE or FULL), seeds, and what this machine has.

Every lab starts with ``env = cl.setup(seed=0)``. ``CLUSTERLAB_SMOKE`` selects the
size: unset or ``1`` means SMOKE (small, fast; what the tests and the book build
use), ``0`` means FULL (the sizes a reader runs by choice).
"""

from __future__ import annotations

import os
import platform
import random
import sys
from dataclasses import dataclass

import numpy as np

from clusterlab.core.validate import check_int

_TRUE = {"1", "true", "yes", "on", ""}


_FALSE = {"0", "false", "no", "off"}


def is_smoke() -> bool:
    """True unless ``CLUSTERLAB_SMOKE`` is set to 0/false/no/off."""
    raw = os.environ.get("CLUSTERLAB_SMOKE", "1").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ValueError(
        f"CLUSTERLAB_SMOKE={raw!r} is not understood: "
        "use 1 (SMOKE, the default) or 0 (FULL)"
    )


def size(*, smoke, full):
    """Return ``smoke`` at SMOKE size and ``full`` at FULL size."""
    return smoke if is_smoke() else full


@dataclass(frozen=True)
class Env:
    """What ``setup`` found: versions, cores, GPUs and the default backend."""

    python: str
    torch: str
    cpus: int
    gpus: int
    backend: str
    smoke: bool
    colab: bool
    seed: int

    def __str__(self) -> str:
        from clusterlab import __version__

        mode = "SMOKE (small, fast)" if self.smoke else "FULL"
        where = "Colab" if self.colab else platform.system()
        return (
            f"clusterlab {__version__} on {where}: "
            f"Python {self.python}, torch {self.torch}, {self.cpus} CPU cores, "
            f"{self.gpus} GPU(s), default backend for 2 ranks: {self.backend}, "
            f"size {mode}, seed {self.seed}"
        )


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's generators."""
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def setup(seed: int = 0, *, quiet: bool = False) -> Env:
    """Seed every generator, print what this machine offers, and return it.

    Args:
        seed: seed for Python, NumPy and torch, in [0, 2**32 - 1].
        quiet: do not print the summary line.

    Returns:
        An ``Env`` with versions, CPU and GPU counts, the backend a 2-rank
        launch would use, and whether the lab runs at SMOKE size.
    """
    import torch

    from clusterlab.core.backend import choose_backend, visible_gpus

    check_int("seed", seed, 0, 2**32 - 1)
    seed_everything(seed)
    env = Env(
        python=platform.python_version(),
        torch=torch.__version__,
        cpus=os.cpu_count() or 1,
        gpus=visible_gpus(),
        backend=choose_backend(2, verbose=False),
        smoke=is_smoke(),
        colab="google.colab" in sys.modules,
        seed=seed,
    )
    if not quiet:
        print(env)
    return env
