"""Mixture of experts: routing, two all-to-alls, balance.

Its code is reached as ``cl.experts.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solution: how many token copies a capacity limit drops.
- ``chart``: Charts of mixture-of-experts layers: all-to-all time, the busiest expert,
  balancing.
- ``check``: Checks of the experts lab: the layer on ranks, its bytes, its straggler,
  its loss.
- ``diagram``: Pictures for experts and long sequences: token routing with all-to-all,
  and
- ``layer`` (ranks): A mixture-of-experts layer in one process: what expert parallelism
  must equal.
- ``ranks``: Expert parallelism: tokens travel to their experts and back in two all-to-
  alls.
- ``router`` (ranks): Training a router to spread its tokens: the auxiliary load-
  balancing loss.
- ``sim``: Random routing, sampled: how loaded the busiest expert is, draw by draw.
- ``widget``: Widget: a published MoE model, tokens per rank, an NVLink domain; the all-
  to-all.
- ``workers`` (ranks): Expert parallelism on real ranks, checked against the layer in
  one process.
"""

from clusterlab.core.lazy import submodules

# The role of each file not named by its role (docs/architecture.md).
ROLES = {"layer": "ranks", "router": "ranks", "workers": "ranks"}

__getattr__, __dir__ = submodules(__name__, __path__)
