"""Choosing: a GPU cluster or distributed CPUs, decided from measured traits.

Its code is reached as ``cl.decide.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solution: is a GPU cheaper per unit of work?
- ``chart``: Charts for the decision helper (the choosing lab and chapter).
- ``check``: Checks of the choosing lab: the exercise, and the measured verdicts.
- ``diagram``: The decision framework as a picture: a workload's traits lead to a
  verdict.
- ``widget``: Widget: a workload's traits in, a recommendation and its reasons out.
"""

from clusterlab.core.lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
