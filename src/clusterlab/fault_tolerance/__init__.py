"""Fault tolerance: training that does not stop (per-step quorums with torchft).

Its code is reached as ``cl.fault_tolerance.<file>.<name>``; each file holds one
role (``docs/architecture.md``), and loads on first use.

- ``train``: one replica group of a torchft run, on CPU and gloo (the command
  ``python -m clusterlab.fault_tolerance.train``).
- ``loopback``: keeps the lighthouse, the manager server, the store and gloo on
  ``127.0.0.1``.
- ``measure``: a lighthouse and groups, one SIGKILL and a restart, measured.
- ``partition``: a group's link cut across emulated nodes, beside the SIGKILL.
- ``sim``: failure schedules, and their cost replayed for each way of recovering.
- ``race``: one schedule run twice, under torchft and under torchrun's restarts,
  each set against its replay.
- ``spikes``: a loss spike from one bad batch: train through it, find it, skip it.
- ``check``: checks of a run's log (exactly-once data, equal parameters, every
  step committed) and the exercise's check.
- ``chart``: committed steps over time, and the goodput of per-step recovery
  against checkpoint-restart.
- ``diagram``: a quorum per step, and a group healing from a live peer.
- ``widget``: the goodput explorer, live.
- ``answer``: the exercise's reference solution.
"""

from clusterlab.core.lazy import submodules

# The role of each file not named by its role.
ROLES = {
    "train": "ranks",
    "loopback": "ranks",
    "spikes": "measure",
    "race": "measure",
    "partition": "measure",
}

__getattr__, __dir__ = submodules(__name__, __path__)
