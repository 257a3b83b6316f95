"""Fully sharded data parallelism: bytes moved and peak memory.

Its code is reached as ``cl.fsdp.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``peak`` (measure): FSDP's peak memory, measured while forward and backward run.
- ``ranks``: Fully sharded data parallelism (FSDP2, ZeRO stage 3), measured byte by
  byte.
"""

from clusterlab.core.lazy import submodules

# The role of each file not named by its role (docs/architecture.md).
ROLES = {"peak": "measure"}

__getattr__, __dir__ = submodules(__name__, __path__)
