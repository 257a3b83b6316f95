"""Data parallelism: DDP by hand and by PyTorch, buckets, ZeRO.

Its code is reached as ``cl.data_parallel.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solution: average the gradients with one all-reduce.
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
"""

from clusterlab.core.lazy import submodules

# The role of each file not named by its role (docs/architecture.md).
ROLES = {"overlap": "measure"}

__getattr__, __dir__ = submodules(__name__, __path__)
