"""Choosing the communication backend: NCCL on GPUs, gloo on CPUs, one code path.

NCCL needs one GPU per rank (two ranks may not share a GPU), so a launch of
``world_size`` ranks uses NCCL only when at least that many GPUs are visible.
"""

from __future__ import annotations

import socket
import warnings

from clusterlab.core.validate import check_int

MAX_WORLD_SIZE = 64


def visible_gpus() -> int:
    """CUDA GPUs this process can see (0 without CUDA); never initialises CUDA."""
    import torch

    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # a broken driver counts as no GPU
        return 0


def choose_backend(world_size: int, *, verbose: bool = True) -> str:
    """Return ``"nccl"`` if every rank can have its own GPU, else ``"gloo"``.

    Args:
        world_size: number of ranks, in [1, 64].
        verbose: warn when GPUs exist but are too few for NCCL.

    Returns:
        The backend name for ``torch.distributed.init_process_group``.
    """
    check_int("world_size", world_size, 1, MAX_WORLD_SIZE)
    gpus = visible_gpus()
    if gpus >= world_size:
        return "nccl"
    if gpus and verbose:
        warnings.warn(
            f"{gpus} GPU(s) visible but {world_size} ranks asked for: NCCL needs one "
            "GPU per rank, so these ranks use gloo on the CPU instead.",
            stacklevel=2,
        )
    return "gloo"


def loopback_interface() -> str:
    """Name of the loopback network interface (``lo`` on Linux, ``lo0`` on macOS)."""
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        names = []
    for name in ("lo", "lo0"):
        if name in names:
            return name
    for name in names:
        if name.startswith("lo"):
            return name
    return "lo"
