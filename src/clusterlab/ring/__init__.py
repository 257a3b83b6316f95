"""The ring all-reduce: built from messages, its algorithms and slow hops.

Its code is reached as ``cl.ring.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solution: the all-gather half of a ring all-reduce.
- ``chart``: Charts for networks and collectives: all-reduce algorithms, ring timings,
  steps.
- ``check``: Exercise check: the all-gather half of the ring all-reduce.
- ``diagram``: All-reduce step by step: a ring, a tree, and NVLS (the switch adds).
- ``measure``: Measure a ring with one slow hop, and decide whether a model explains it.
- ``ranks``: Ring all-reduce built from point-to-point messages (the teaching version).
- ``widget``: Widgets for all-reduce models and interconnects: controls to models to
  charts.
"""

from clusterlab.core.lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
