"""Time and order: clocks that drift, logical clocks, and where skew bites.

Its code is reached as ``cl.clocks.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solution: does one vector timestamp come before another?
- ``chart``: Charts of physical time: clock error and skew over time.
- ``check``: Exercise check: the happened-before test on vector timestamps.
- ``heartbeat_check`` (measure): Measure the two heartbeat detectors under skew, and
  decide what they showed.
- ``heartbeats`` (ranks): Heartbeats between real processes, judged by two failure
  detectors.
- ``logical`` (sim): Happened-before, Lamport clocks and vector clocks over a message
  exchange.
- ``ranks``: A real ring all-reduce whose ranks keep deliberately wrong wall clocks.
- ``rendezvous`` (measure): Rendezvous ids: a launch that hangs because each node read
  its own clock.
- ``rendezvous_worker`` (ranks): The worker of the rendezvous demonstration: one all-
  reduce, one line of JSON.
- ``sim``: Physical clocks that drift, and the protocols that pull them back (SimPy).
- ``spacetime`` (chart): The space-time diagram: processes as lanes, messages as arrows,
  clocks on events.
- ``widget``: Widget: drift, sync interval and protocol in, the skew chart out.
"""

from clusterlab.core.lazy import submodules

# The role of each file not named by its role (docs/architecture.md).
ROLES = {
    "heartbeat_check": "measure",
    "heartbeats": "ranks",
    "logical": "sim",
    "rendezvous": "measure",
    "rendezvous_worker": "ranks",
    "spacetime": "chart",
}

__getattr__, __dir__ = submodules(__name__, __path__)
