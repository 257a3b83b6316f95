"""Stragglers: the slowest of N sets the step, and what mitigates it.

Its code is reached as ``cl.stragglers.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solution: the expected maximum of n independent times.
- ``chart``: Charts of stragglers: how the slowest of N sets the step, and what
  mitigates it.
- ``check``: Exercise check: the expected maximum of n independent times.
- ``diagram``: Jobs at scale as pictures: a straggler at the barrier, checkpoints and
  lost
- ``evidence`` (check): The checks that decide the stragglers lab's verdicts, each able
  to fail.
- ``ranks``: Stragglers for real: a data-parallel training loop with injected compute
  times.
- ``sim``: Stragglers, simulated: workers, a barrier, backup workers and local SGD.
- ``widget``: Widget: pick N, the noise, slow workers and a mitigation; see the step.
"""

from clusterlab.core.lazy import submodules

# The role of each file not named by its role (docs/architecture.md).
ROLES = {"evidence": "check"}

__getattr__, __dir__ = submodules(__name__, __path__)
