"""Real ``torch.distributed`` code: the launcher and the choice of backend."""

from .backend import choose_backend, loopback_interface, visible_gpus
from .launcher import LaunchError, RankReport, launch
from .torchrun import run_torchrun, torchrun_command

__all__ = [
    "LaunchError",
    "RankReport",
    "choose_backend",
    "launch",
    "loopback_interface",
    "run_torchrun",
    "torchrun_command",
    "visible_gpus",
]

from .._lazy import lazy_attributes  # noqa: E402

# Topic modules added later load on first use, e.g. cl.dist.<topic>.
__getattr__, __dir__ = lazy_attributes(__name__, __path__)
