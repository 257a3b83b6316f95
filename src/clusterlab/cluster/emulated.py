"""An emulated cluster on one machine: a context manager that builds and removes it.

::

    with EmulatedCluster(Topology(nodes=2, rate_mbit=200)) as c:
        c.address(1)                      # '10.213.0.2', inside the nodes only
        c.popen(0, [sys.executable, "-c", "..."])   # a process on node 0
        c.partition([0], [1])             # nftables drops, both ways
        c.heal()

Entering first removes the book's own leftovers (``names.remove_leftovers``),
then records this process as the owner and builds the network
(``build.build``). Leaving kills every process the cluster started (found by
its mark and its namespaces) and removes the namespaces, which takes their
links, bridges and nftables tables with them. Processes it starts die with the
driver (``PR_SET_PDEATHSIG``), and a driver killed by SIGKILL leaves only
namespaces, which the next cluster removes.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess

from clusterlab.cluster import build, faults, names
from clusterlab.cluster.support import why_not
from clusterlab.cluster.topology import Topology
from clusterlab.core.validate import check_float, check_int


class CannotEmulate(RuntimeError):
    """This machine cannot build emulated nodes; the message says why."""


def _die_with_driver() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class _Placement:
    """Moves rank ``r`` of a fork launch into node ``r // ranks_per_node``."""

    def __init__(self, spaces: list[str], ranks_per_node: int, cluster_id: str):
        self.spaces, self.per_node, self.cluster_id = spaces, ranks_per_node, cluster_id

    def __call__(self, rank: int) -> str:
        from pyroute2 import netns

        os.environ[names.MARK] = self.cluster_id
        netns.setns(self.spaces[rank // self.per_node], flags=0)
        return "eth0"


class EmulatedCluster:
    """Nodes with their own addresses joined by shaped links; see the module."""

    def __init__(self, topology: Topology):
        if not isinstance(topology, Topology):
            raise ValueError(f"topology={topology!r} must be a cl.cluster.Topology")
        self.topology = topology
        self.id: str | None = None
        self.spaces: dict[str, str] = {}
        self._faulty: set[int] = set()
        self._owner_pid: int | None = None

    def __enter__(self) -> EmulatedCluster:
        reason = why_not()
        if reason:
            raise CannotEmulate(reason)
        names.remove_leftovers()
        self.id = names.new_id()
        self._owner_pid = os.getpid()
        names.claim(self.id)
        try:
            self.spaces = build.build(self.topology, self.id)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Kill the cluster's processes and remove everything it made.

        Only in the process that made it: a forked copy of that process (one of
        pyroute2's helpers, unwinding on a signal) leaves it alone.
        """
        if self.id is not None and os.getpid() == self._owner_pid:
            names.remove(self.id)

    # --- where things are -------------------------------------------------
    def _node(self, node) -> int:
        return check_int("node", node, 0, self.topology.nodes - 1)

    def netns(self, node: int) -> str:
        """The name of node ``node``'s network namespace."""
        return self.spaces[f"node{self._node(node)}"]

    def address(self, node: int) -> str:
        """Node ``node``'s address (it exists only inside the nodes)."""
        return self.topology.address(self._node(node))

    def placement(self, ranks_per_node: int) -> _Placement:
        """What ``core.launcher._launch`` calls in each rank to put it on a node."""
        check_int("ranks_per_node", ranks_per_node, 1, 64)
        spaces = [self.netns(i) for i in range(self.topology.nodes)]
        return _Placement(spaces, ranks_per_node, self.id)

    def popen(self, node: int, argv: list[str], env: dict | None = None, **kw):
        """Start ``argv`` (a list, no shell) on node ``node``, marked as ours."""
        if not isinstance(argv, list | tuple) or not argv:
            raise ValueError(f"argv={argv!r} must be a non-empty list of arguments")
        env = dict(os.environ if env is None else env)
        env[names.MARK] = self.id
        cmd = ["ip", "netns", "exec", self.netns(node), *map(str, argv)]
        return subprocess.Popen(
            cmd, env=env, preexec_fn=_die_with_driver, start_new_session=True, **kw
        )

    # --- faults -----------------------------------------------------------
    def link_down(self, node: int) -> None:
        """Take node ``node``'s link down (its carrier drops)."""
        build.set_link(self.spaces, f"n{self._node(node)}", up=False)

    def link_up(self, node: int) -> None:
        """Bring node ``node``'s link back up."""
        build.set_link(self.spaces, f"n{self._node(node)}", up=True)

    def partition(self, side_a, side_b, both_ways: bool = True) -> None:
        """Cut ``side_a`` off from ``side_b`` (A's packets to B dropped; B's too)."""
        a = sorted({self._node(n) for n in side_a})
        b = sorted({self._node(n) for n in side_b})
        if not a or not b or set(a) & set(b):
            raise ValueError(
                f"side_a={a} and side_b={b} must be non-empty, disjoint node lists"
            )
        b_addr = [self.address(n) for n in b]
        for n in a:
            faults.drop_to(self.netns(n), b_addr)
        self._faulty |= set(a)
        if both_ways:
            a_addr = [self.address(n) for n in a]
            for n in b:
                faults.drop_to(self.netns(n), a_addr)
            self._faulty |= set(b)

    def loss(self, nodes, percent: float) -> None:
        """Drop ``percent`` (in [0, 100]) of each node's packets at random."""
        percent = check_float("percent", percent, 0.0, 100.0)
        for n in sorted({self._node(n) for n in nodes}):
            faults.random_loss(self.netns(n), percent)
            self._faulty.add(n)

    def heal(self) -> None:
        """Remove every partition and loss rule."""
        for n in sorted(self._faulty):
            faults.heal(self.netns(n))
        self._faulty.clear()

    def residue(self) -> dict:
        """What of this cluster is still on the machine (empty lists after close)."""
        cid = self.id
        return {
            "namespaces": [n for n in names.book_namespaces() if names.id_of(n) == cid],
            "processes": names.book_processes([cid]) if cid else [],
            "owner_record": bool(cid) and (names.OWNERS / cid).exists(),
        }
