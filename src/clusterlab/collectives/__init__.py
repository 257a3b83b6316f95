"""Collectives: benchmarks in nccl-tests' terms, bus bandwidth, servers.

Its code is reached as ``cl.collectives.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solutions: bus bandwidth and matmul intensity.
- ``chart``: Charts of cluster hardware: link rates and collective bandwidth.
- ``check``: Checks of the collectives lab: the ring model's floor, and a held-out fit.
- ``diagram``: Servers and clusters as pictures, every rate on them read from ``data/``.
- ``widget``: Live widgets: the busbw model and the roofline explorer.
"""

from clusterlab.core.lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
