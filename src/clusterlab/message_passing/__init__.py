"""Message passing: processes that share nothing and talk by messages.

Its code is reached as ``cl.message_passing.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solution: reduce to rank 0, then broadcast the total.
- ``chart``: Charts of message cost: measured times, the alpha–beta model, and
  bandwidth.
- ``check``: Checks of the message-passing lab: reduce then broadcast, and a predicted
  message.
- ``diagram``: Space-time diagrams: processes, messages, a crash, clocks that disagree.
- ``hello`` (ranks): A first process group started by ``torchrun``: each rank reports an
  all-reduce.
- ``widget``: Widget: message size and world size in, the alpha-beta model's time out.
"""

from clusterlab.core.lazy import submodules

# The role of each file not named by its role (docs/architecture.md).
ROLES = {"hello": "ranks"}

__getattr__, __dir__ = submodules(__name__, __path__)
