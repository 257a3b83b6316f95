"""Data parallelism: DDP by hand and by PyTorch, buckets, ZeRO.

Its code is reached as ``cl.data_parallel.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solutions: one all-reduce by hand, overlapped DDP, and ZeRO-1.
- ``chart``: Charts for data parallelism: where a step's time goes, DDP's buckets, ZeRO
  memory.
- ``check``: Checks of data parallelism: the exercises, and the step's measured
  communication.
- ``diagram``: Data parallelism as pictures: buckets under the backward pass, ZeRO,
  FSDP.
- ``overlap`` (measure): DDP's buckets across two emulated nodes, where the network is
  the bottleneck.
- ``ranks``: Data parallelism by hand and with ``DistributedDataParallel``, on one code
  path.
- ``widget``: Widgets for data parallelism: ZeRO memory per GPU, and DDP's bucket count.

The two reference classes are also reached from the topic itself, as
``from clusterlab.data_parallel import OverlappedDDP, ShardedOptimizer`` (or
``cl.data_parallel.OverlappedDDP``), so a test suite written against those names
can import them; they load with ``answer`` on first use.
"""

import importlib

from clusterlab.core.lazy import submodules

# The role of each file not named by its role (docs/architecture.md).
ROLES = {"overlap": "measure"}

#: Names reached from the topic itself, with the file that holds each.
EXPORTS = {"OverlappedDDP": "answer", "ShardedOptimizer": "answer"}

_file, __dir__ = submodules(__name__, __path__)


def __getattr__(name: str):
    if name in EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{EXPORTS[name]}"), name)
    return _file(name)


__all__ = sorted(EXPORTS)
