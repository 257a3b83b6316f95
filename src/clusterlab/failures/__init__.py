"""Failure: detectors, what survivors see, crash and resume.

Its code is reached as ``cl.failures.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solution: a heartbeat detector's mean detection time.
- ``chart``: Charts of failure: what survivors see, and heartbeat failure detectors.
- ``check``: Exercise check for failure detection: a heartbeat detector's detection
  time.
- ``diagram``: A heartbeat failure detector as a picture, with a false suspicion.
- ``ranks``: Kill or freeze one rank of a real process group and record what the others
  see.
- ``resume`` (ranks): A training run that checkpoints, crashes, and resumes where its
  checkpoint left it.
- ``sim``: A heartbeat failure detector over a network that delays and loses messages.
- ``widget``: Widget for failure detection: a heartbeat detector against its timeout.
"""

from clusterlab.core.lazy import submodules

# The role of each file not named by its role (docs/architecture.md).
ROLES = {"resume": "ranks", "lossy": "measure"}

__getattr__, __dir__ = submodules(__name__, __path__)
