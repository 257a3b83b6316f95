"""``cl.launch`` across emulated nodes: the same ranks, now with a network between.

``launch(fn, nodes=2, ranks_per_node=2, rate_mbit=100)`` builds a flat cluster
(or uses ``cluster=`` one already built), forks ``nodes * ranks_per_node`` ranks
as ``cl.launch`` does, and moves rank ``r`` into node ``r // ranks_per_node``
before torch starts: its gloo sockets bind that node's address, ranks of one
node reach each other over the node's own loopback, and ranks of different
nodes cross shaped links. Failures are reported as ``cl.launch`` reports them:
the rank and its traceback (``LaunchError``).
"""

from __future__ import annotations

from clusterlab.cluster.emulated import EmulatedCluster
from clusterlab.cluster.topology import Topology
from clusterlab.core.launcher import _launch
from clusterlab.core.validate import check_float, check_int


def launch(
    fn,
    /,
    nodes: int = 2,
    ranks_per_node: int = 1,
    rate_mbit: float = 100.0,
    *,
    cluster: EmulatedCluster | None = None,
    timeout: float = 60.0,
    **kwargs,
):
    """Run ``fn(rank, world_size, **kwargs)`` on ranks spread over emulated nodes.

    Args:
        fn: the worker, as for ``cl.launch``.
        nodes: nodes, in [1, 8] (ignored when ``cluster`` is given).
        ranks_per_node: ranks on each node, in [1, 8].
        rate_mbit: each node's link, Mbit/s (ignored when ``cluster`` is given).
        cluster: an entered ``EmulatedCluster`` to run on, or None to build one
            for this launch and remove it afterwards.
        timeout: seconds, the process group's timeout, in (0, 86400].
        **kwargs: passed to ``fn``.

    Returns:
        The ranks' return values, index = rank.
    """
    check_int("ranks_per_node", ranks_per_node, 1, 8)
    timeout = check_float("timeout", timeout, 0.0, 86400.0, low_inclusive=False)
    if cluster is None:
        with EmulatedCluster(Topology(nodes=nodes, rate_mbit=rate_mbit)) as c:
            return launch(
                fn, ranks_per_node=ranks_per_node, cluster=c, timeout=timeout, **kwargs
            )
    world = cluster.topology.nodes * ranks_per_node
    placement = cluster.placement(ranks_per_node)
    return _launch(fn, world, "gloo", timeout, "fork", kwargs, placement=placement)
