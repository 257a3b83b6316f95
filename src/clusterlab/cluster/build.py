"""Building and removing an emulated cluster's network, through netlink (pyroute2).

One namespace per node (``clusterlab-<id>-node<i>``) holds that node's loopback
and its one interface ``eth0`` with its address; one more, the fabric
(``clusterlab-<id>-fabric``), holds the switches (Linux bridges) and the far
ends of the links. Every link is a veth pair shaped in both directions by a
token-bucket filter (``tbf``) at its rate. Nothing is made in the host's own
namespace: the nodes have no route to the host's interfaces, no NAT and no
forwarding, and removing the namespaces removes every link, bridge and nftables
table in them.
"""

from __future__ import annotations

from clusterlab.cluster.names import netns_name
from clusterlab.cluster.topology import Topology

PREFIXLEN = 24
BURST_BYTES = 32 * 1024
LATENCY = "50ms"


def _off_the_event_loop(fn):
    """Run ``fn`` in a thread of its own when this thread runs an event loop.

    pyroute2's synchronous API drives an asyncio loop of its own, which cannot
    start inside a running one (a Jupyter kernel's).
    """
    import asyncio
    import functools
    from concurrent.futures import ThreadPoolExecutor

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return fn(*args, **kwargs)
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(fn, *args, **kwargs).result()

    return wrapper


#: Seconds an ``ip`` command may take before the build gives up on it.
IP_TIMEOUT_S = 10.0


def _veth(netns: str, name: str, peer: str, fab=None) -> None:
    """Add a veth pair ``name``/``peer`` in ``netns``, with iproute2's ``ip``.

    pyroute2 0.9.7 at times never receives the kernel's answer to this one
    request (about one build in six here, waiting forever), so it goes
    through ``ip``, with a timeout; everything else stays on netlink.
    """
    import subprocess

    cmd = ["ip", "-n", netns, "link", "add", name, "type", "veth", "peer", "name", peer]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{' '.join(cmd)} took over {IP_TIMEOUT_S:g} s") from exc
    if out.returncode != 0:
        if fab is None:
            raise RuntimeError(f"{' '.join(cmd)} failed: {out.stderr.strip()}")
        # ip could not open the namespace by its name: netlink, through the
        # handle already open on it
        fab.link("add", ifname=name, kind="veth", peer={"ifname": peer})


def namespaces(topology: Topology, cluster_id: str) -> dict[str, str]:
    """The namespace of each part: ``{"fabric": ..., "node0": ..., ...}``."""
    parts = ["fabric", *topology.node_names]
    return {p: netns_name(cluster_id, p) for p in parts}


def _shape(ipr, index: int, rate_mbit: float) -> None:
    ipr.tc(
        "add",
        "tbf",
        index,
        rate=f"{rate_mbit:g}mbit",
        burst=BURST_BYTES,
        latency=LATENCY,
    )


def _index(ipr, ifname: str) -> int:
    found = ipr.link_lookup(ifname=ifname)
    if not found:
        raise RuntimeError(f"interface {ifname!r} was not made")
    return found[0]


@_off_the_event_loop
def build(topology: Topology, cluster_id: str) -> dict[str, str]:
    """Make the namespaces, switches and shaped links of ``topology``.

    Args:
        topology: the cluster's shape.
        cluster_id: the id every name carries (``names.new_id``).

    Returns:
        The namespace of each part, as :func:`namespaces`.
    """
    from pyroute2 import NetNS, netns

    spaces = namespaces(topology, cluster_id)
    for name in spaces.values():
        netns.create(name)
    fab = NetNS(spaces["fabric"])
    try:
        for sw in topology.switches:
            fab.link("add", ifname=sw, kind="bridge")
            fab.link("set", index=_index(fab, sw), state="up")
        for link in topology.links:
            if link.a.startswith("node"):
                _node_link(fab, topology, spaces, int(link.a[4:]), link)
            else:
                _uplink(fab, spaces["fabric"], link)
        fab.link("set", index=_index(fab, "lo"), state="up")
    finally:
        fab.close()
    return spaces


def _node_link(fab, topology, spaces, node: int, link) -> None:
    """A node's link: ``eth0`` in the node, ``n<i>`` on its switch."""
    from pyroute2 import NetNS

    peer = f"e{node}"
    _veth(spaces["fabric"], link.name, peer, fab)
    fab.link("set", index=_index(fab, peer), net_ns_fd=spaces[f"node{node}"])
    far = _index(fab, link.name)
    fab.link("set", index=far, master=_index(fab, link.b), state="up")
    _shape(fab, far, link.rate_mbit)
    ns = NetNS(spaces[f"node{node}"])
    try:
        ns.link("set", index=_index(ns, "lo"), state="up")
        eth = _index(ns, peer)
        ns.link("set", index=eth, ifname="eth0")
        ns.addr("add", index=eth, address=topology.address(node), prefixlen=PREFIXLEN)
        ns.link("set", index=eth, state="up")
        _shape(ns, eth, link.rate_mbit)
    finally:
        ns.close()


def _uplink(fab, fabric_netns: str, link) -> None:
    """A leaf's uplink: ``up<j>`` on the leaf, ``up<j>s`` on the spine."""
    spine_end = f"{link.name}s"
    _veth(fabric_netns, link.name, spine_end, fab)
    for ifname, switch in ((link.name, link.a), (spine_end, link.b)):
        idx = _index(fab, ifname)
        fab.link("set", index=idx, master=_index(fab, switch), state="up")
        _shape(fab, idx, link.rate_mbit)


@_off_the_event_loop
def set_link(spaces: dict[str, str], ifname: str, up: bool) -> None:
    """Take one link down or up, at its fabric end (the peer loses carrier)."""
    from pyroute2 import NetNS

    fab = NetNS(spaces["fabric"])
    try:
        fab.link("set", index=_index(fab, ifname), state="up" if up else "down")
    finally:
        fab.close()


@_off_the_event_loop
def link_state(spaces: dict[str, str], ifname: str) -> str:
    """``"up"`` or ``"down"``: the administrative state of a link's fabric end."""
    from pyroute2 import NetNS

    fab = NetNS(spaces["fabric"])
    try:
        msg = fab.get_links(_index(fab, ifname))[0]
        return "up" if msg["flags"] & 1 else "down"
    finally:
        fab.close()
