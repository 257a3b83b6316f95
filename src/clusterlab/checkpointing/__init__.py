"""Checkpointing: Young/Daly, goodput, distributed checkpoints.

Its code is reached as ``cl.checkpointing.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solution: the first-order waste of a checkpoint interval.
- ``chart``: Charts of checkpointing: goodput against the interval, and a job's
  timeline.
- ``check``: Exercise check for checkpointing: the first-order waste of an interval.
- ``diagram``: Checkpointing as a picture: a job's timeline of checkpoints, failures and
  lost work.
- ``ranks``: Distributed checkpoints with ``torch.distributed.checkpoint`` (DCP).
- ``sim``: A training job on many parts that fail at random, with checkpoints and
  restarts.
- ``widget``: Widget for checkpointing: GPUs, MTBF, checkpoint and restart cost ->
  goodput.
"""

from clusterlab.core.lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
