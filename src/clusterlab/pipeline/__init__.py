"""Pipeline parallelism: stages, micro-batches, the bubble and schedules.

Its code is reached as ``cl.pipeline.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solution: the fewest micro-batches for a pipeline bubble target.
- ``chart``: Charts of pipeline schedules: who computes when, and how much time is idle.
- ``check``: Exercise check: the fewest micro-batches that keep the pipeline bubble
  small.
- ``check_schedules`` (check): Checks for the interleaved and zero-bubble schedules:
  bubble, and (v, m) under a cap.
- ``diagram``: Model parallelism as pictures: tensor and sequence parallelism, pipeline
- ``measure``: The pipeline bubble measured on real ranks, and a check of a bubble
  model.
- ``ranks``: Pipeline parallelism by hand: stages on ranks, micro-batches over
  send/recv.
- ``schedules`` (ranks): Interleaved and zero-bubble pipeline schedules, run by
  PyTorch's own pipelining.
- ``widget``: Widget: pick stages, micro-batches and a schedule; see the Gantt chart.
"""

from clusterlab.core.lazy import submodules

# The role of each file not named by its role (docs/architecture.md).
ROLES = {"check_schedules": "check", "schedules": "ranks"}

__getattr__, __dir__ = submodules(__name__, __path__)
