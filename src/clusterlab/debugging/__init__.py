"""Debugging a job: injected faults, stacks, timings, profiles, preflight.

Its code is reached as ``cl.debugging.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solution of the debugging lab's exercise: name a hung job's
  culprit.
- ``chart``: Charts for debugging a distributed job: a step's timeline, ranks' step
  times.
- ``check``: Self-check of the debugging lab's exercise: name the culprit of a hung job.
- ``evidence`` (check): The checks that decide the debugging lab's verdicts, each able
  to fail.
- ``faults`` (measure): Run a job with one injected fault and look at it the ways one
  debugs a real job.
- ``preflight`` (measure): A preflight check to run on every rank of a real job
  before it trains.
- ``preflight_report`` (measure): The preflight check's arithmetic: clock offsets, rail
  pairs and its report.
- ``profile`` (measure): A ``torch.profiler`` trace of one data-parallel step, as a tidy
  DataFrame.
- ``ranks``: Training steps that go wrong the ways real jobs do, one fault at a time.
- ``stacks`` (measure): Group the stack dumps of a hung job's ranks so that the odd rank
  stands out.
- ``timings`` (measure): Per-rank step timings that single out a slow rank, and the rule
  that decides.
- ``widget``: Widget: a slow rank among N jittery ones, and whether the rule finds it.
"""

from clusterlab.core.lazy import submodules

# The role of each file not named by its role (docs/architecture.md).
ROLES = {
    "evidence": "check",
    "faults": "measure",
    "preflight": "measure",
    "preflight_report": "measure",
    "profile": "measure",
    "stacks": "measure",
    "timings": "measure",
}

__getattr__, __dir__ = submodules(__name__, __path__)
