"""Economics: owning against renting, and what a useful GPU-hour costs.

Its code is reached as ``cl.economics.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solution: the cloud price that gives a target break-even.
- ``chart``: Charts of owning against renting GPU-hours (the economics lab and chapter).
- ``check``: Checks of the economics lab: the break-even exercise, the capex back-test,
- ``diagram``: What a cluster's money buys, as a picture: servers, fabric, storage,
  facility.
- ``widget``: Widget: owning against renting, with every input on a slider.
"""

from clusterlab.core.lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
