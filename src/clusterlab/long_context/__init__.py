"""Long sequences: ring attention, Ulysses, blockwise attention.

Its code is reached as ``cl.long_context.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solution: the online-softmax merge of two blocks' attention.
- ``blocks`` (ranks): Blockwise attention: one query block against one key block, and
  how to merge.
- ``chart``: Charts of long-sequence training: CP's memory, traffic and exposed time.
- ``check``: Checks of the long-context lab: ring attention against full attention.
- ``diagram``: Ring attention as a picture: query blocks stay, key and value blocks
  travel.
- ``ranks``: Context parallelism: attention over a sequence split across ranks.
- ``widget``: Widget: a model and a degree; which split of a long sequence waits least.
- ``workers`` (ranks): Workers for the long-context lab and its tests: attention on
  sharded ranks.
"""

from clusterlab.core.lazy import submodules

# The role of each file not named by its role (docs/architecture.md).
ROLES = {"blocks": "ranks", "workers": "ranks"}

__getattr__, __dir__ = submodules(__name__, __path__)
