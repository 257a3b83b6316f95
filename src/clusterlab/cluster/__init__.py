"""The emulated cluster: nodes with their own addresses and shaped links.

A layer like ``core`` (it imports only ``core``); topics may use it. Reached as
``cl.cluster.<file>.<name>``; each file loads on first use.

- ``topology``: the shape (flat, or leaves under a spine), which builds and draws.
- ``build``: namespaces, bridges, veth pairs and tbf shaping, through netlink.
- ``faults``: partitions and random loss as nftables rules inside the nodes.
- ``names``: the book's name prefix and process mark, and removal of leftovers.
- ``emulated``: ``EmulatedCluster``, the context manager that builds and removes.
- ``launch``: ``cl.launch`` with its ranks placed on emulated nodes.
- ``allreduce``: a timed all-reduce, flat ring or hierarchical.
- ``support``: whether this machine can emulate, and if not why.
- ``recorded``: sweeps across nodes, or the book's recorded run where none can run.
- ``experiments``: the network labs' experiments, at SMOKE and FULL size.
- ``verdicts``: the checks that decide the network claims from measured runs.
- ``diagram``: the topology drawn from the object that builds it.

``python -m clusterlab.cluster allreduce ... --json`` runs one from a shell.
"""

from clusterlab.core.lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
