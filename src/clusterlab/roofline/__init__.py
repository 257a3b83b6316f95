"""The roofline: GPU against CPU, and the workloads that suit each.

Its code is reached as ``cl.roofline.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solution: the arithmetic intensity of a matmul.
- ``chart``: Charts of the roofline: workloads against two roofs, and CPU cores for a
  stream.
- ``check``: Exercise check of the roofline lab: a matmul's arithmetic intensity.
- ``diagram``: A processor beside its memory, and what a cluster's money buys.
- ``kernels`` (measure): Kernels of the per-record workloads: serving, a key-value
  store, preprocessing,
- ``measure``: Measuring the two roofs of this machine: matmul FLOP/s and streaming
  bytes/s.
- ``phase_clock`` (measure): The clock of the workload kernels: seconds per phase, FLOPs
  and bytes counted.
- ``widget``: Live widget: the roofline explorer (workloads against two roofs).
- ``workloads`` (measure): Measuring a workload's traits: small kernels of the GPU-or-
  CPU table, timed.
"""

from clusterlab.core.lazy import submodules

# The role of each file not named by its role (docs/architecture.md).
ROLES = {"kernels": "measure", "phase_clock": "measure", "workloads": "measure"}

__getattr__, __dir__ = submodules(__name__, __path__)
