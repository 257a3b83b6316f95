"""Planning a layout: the 3-D and 5-D parallelism planners.

Its code is reached as ``cl.planner.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solutions: bytes of model state per parameter and per GPU, with
  ZeRO.
- ``chart``: Charts of parallelism plans: memory per GPU against estimated MFU.
- ``check``: Exercise checks: model state per parameter under ZeRO, and per GPU in 5-D.
- ``diagram``: A parallel layout on nodes as a picture: TP, CP, DP and PP ranks placed.
- ``widget``: Widget: choose a model, GPUs, memory and the 5-D knobs; see which plans
  fit.
"""

from clusterlab.core.lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
