"""Serving on a cluster: tensor-parallel decoding and disaggregated prefill.

Its code is reached as ``cl.serving_cluster.<file>.<name>``; each file holds one
role (``docs/architecture.md``), and loads on first use. It runs the serving
topic's engine (``cl.serving.engine``) on several ranks.

- ``ranks``: tensor-parallel decoding: the engine split by heads and MLP columns.
- ``disagg``: prefill on one rank, decode on another, the KV cache sent between.
- ``measure``: the runs launched on real process groups, and tabulated.
- ``chart``, ``diagram``, ``widget``: the all-reduce chart, the disaggregated
  pipeline, and the "when does disaggregation pay" explorer.
- ``check``, ``answer``: the lab's checks and its exercise's solution.
"""

from clusterlab.core.lazy import submodules

# The role of each file not named by its role.
ROLES = {"disagg": "ranks"}

__getattr__, __dir__ = submodules(__name__, __path__)
