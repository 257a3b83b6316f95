"""Interconnects: what a faster or shared network buys a training step.

Its code is reached as ``cl.interconnects.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solution: how many network ports a node needs.
- ``chart``: Charts of interconnects: a step's time by network, and what contention
  costs.
- ``check``: Exercise check: how many network ports a node needs (the interconnects
  lab).
- ``measure``: Measure mixed-speed ranks and a shared network, and decide whether a
  model fits.
- ``widget``: Widget: a node's network ports, link rates and step time (interconnects).
"""

from clusterlab.core.lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
