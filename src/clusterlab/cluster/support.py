"""Whether this machine can emulate a cluster, and if not, why, in one sentence."""

from __future__ import annotations

import os
import shutil
import sys

FORCE_FALLBACK = "CLUSTERLAB_NO_EMULATION"


def why_not() -> str | None:
    """None if a cluster can be emulated here, else one sentence saying why not.

    Returns:
        None, or the reason: not Linux, not root, a missing tool or library, or
        ``CLUSTERLAB_NO_EMULATION`` set (which forces the recorded run).
    """
    if os.environ.get(FORCE_FALLBACK):
        return f"{FORCE_FALLBACK} is set, so the recorded run is shown instead."
    if not sys.platform.startswith("linux"):
        return "Emulated nodes need Linux network namespaces, which this system lacks."
    if os.geteuid() != 0:
        return "Emulated nodes need root (CAP_NET_ADMIN) to make network namespaces."
    for tool, package in (("ip", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            return f"Emulated nodes need the {tool!r} command (package {package})."
    try:
        import pyroute2  # noqa: F401
    except ImportError:
        return "Emulated nodes need the Python package pyroute2, not installed here."
    if not os.path.exists("/proc/self/ns/net"):
        return "This kernel has no network namespaces."
    return None
