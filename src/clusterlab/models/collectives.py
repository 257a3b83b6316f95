"""The alpha–beta (Hockney) model of sending a message, and all-reduce costs.

A message of ``S`` bytes costs a fixed start-up time ``alpha`` (seconds) plus
``S / beta`` seconds at bandwidth ``beta`` (bytes/s). Every collective-cost
formula in the book is built from this one line:

* **ring** all-reduce over ``n`` ranks: ``2 (n-1) alpha + 2 (n-1)/n * S / B``
  (``n - 1`` steps of reduce-scatter and ``n - 1`` of all-gather, each moving
  ``S / n`` bytes): bandwidth-optimal, but its latency grows with ``n``;
* **tree**, here Rabenseifner's algorithm (recursive-halving reduce-scatter,
  then recursive-doubling all-gather):
  ``2 log2(n) alpha + 2 (n-1)/n * S / B``, the same bytes in fewer steps
  (Thakur, Rabenseifner & Gropp 2005); NCCL's double binary tree is a
  different algorithm, not modelled here;
* **hierarchical**: reduce-scatter inside each node over its fast links, then
  every GPU all-reduces its ``1/g`` share between the nodes (all ``g`` GPUs of a
  node at once, each on its share of the node's network), then an all-gather
  inside the node.

Measured all-reduces are read from published sweeps instead:
:func:`bus_bandwidth` gives a named system's bus bandwidth at any message
size, and :func:`allreduce_time_published` turns it into seconds.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from clusterlab.core import published
from clusterlab.core.validate import check_choice, check_float, check_int

ALGORITHMS = ("ring", "tree", "hierarchical")


_TOPOLOGY = ("gpus_per_node", "intra_alpha_s", "intra_bandwidth_Bps")


#: NVLink domain sizes the models know: 8, an HGX or DGX server, whose NVLink
#: ends at the server; 72, a GB200 or GB300 NVL72 rack, whose NVLink joins 72
#: GPUs across its servers.
NVLINK_DOMAINS = (8, 72)


def scale_up_size(nvlink_domain: int = 8, gpus_per_node: int = 8) -> int:
    """GPUs that reach each other over NVLink (the scale-up domain).

    A group of GPUs no larger than this runs its collectives at the scale-up
    (NVLink) bandwidth; a larger one crosses the scale-out network. Groups
    are taken to be placed so that one that fits never straddles two domains.

    Args:
        nvlink_domain: 8 (an HGX or DGX server: the domain is the server's
            ``gpus_per_node`` GPUs, the book's default) or 72 (an NVL72 rack).
        gpus_per_node: GPUs per server, >= 1; for 72 it must divide 72, since
            a server sits inside one domain.

    Returns:
        ``gpus_per_node`` for 8, 72 for 72.
    """
    if isinstance(nvlink_domain, bool) or nvlink_domain not in NVLINK_DOMAINS:
        raise ValueError(
            f"nvlink_domain={nvlink_domain!r} is not allowed: choose one of "
            f"{NVLINK_DOMAINS} (an 8-GPU server, or a 72-GPU NVL72 rack)"
        )
    g = check_int("gpus_per_node", gpus_per_node, 1)
    if nvlink_domain == 8:
        return g
    if 72 % g:
        raise ValueError(
            f"gpus_per_node={g} must divide nvlink_domain=72: a server sits in "
            "one NVLink domain"
        )
    return 72


def on_nvlink(group: int, nvlink_domain: int = 8, gpus_per_node: int = 8) -> bool:
    """Whether a group of ``group`` GPUs fits in one NVLink domain.

    Args:
        group: GPUs in the group (a TP, CP or EP group, or all of a job), >= 1.
        nvlink_domain, gpus_per_node: as in :func:`scale_up_size`.

    Returns:
        True if the group's collectives stay on NVLink, False if they cross
        the network.
    """
    group = check_int("group", group, 1)
    return group <= scale_up_size(nvlink_domain, gpus_per_node)


def alpha_beta_time(nbytes, alpha_s: float, beta_Bps: float):
    """Time to send ``nbytes`` under the alpha–beta model: ``alpha + nbytes / beta``.

    Args:
        nbytes: message size in bytes (a number or an array), >= 0.
        alpha_s: start-up latency in seconds, >= 0.
        beta_Bps: bandwidth in bytes per second, > 0 (``inf`` allowed).

    Returns:
        Seconds, with the shape of ``nbytes``.
    """
    alpha_s = check_float("alpha_s", alpha_s, 0.0)
    try:
        beta = float(beta_Bps)
    except (TypeError, ValueError):
        raise ValueError(f"beta_Bps={beta_Bps!r} must be a number > 0") from None
    if not beta > 0:
        raise ValueError(f"beta_Bps={beta_Bps!r} is out of range: allowed (0, inf]")
    size = np.asarray(nbytes, dtype=float)
    if np.any(~np.isfinite(size)) or np.any(size < 0):
        raise ValueError(f"nbytes={nbytes!r} must be finite and >= 0 bytes")
    t = alpha_s + size / beta
    return float(t) if t.ndim == 0 else t


def _bandwidth(name: str, value) -> float:
    """A bandwidth in bytes/s, > 0 (``inf`` allowed, for latency-only cases)."""
    try:
        bw = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r} must be a number > 0 bytes/s") from None
    if isinstance(value, bool) or not bw > 0:
        raise ValueError(f"{name}={value!r} is out of range: allowed (0, inf] bytes/s")
    return bw


def _ring(size, n: int, alpha_s: float, bw: float):
    return 2 * (n - 1) * alpha_s + 2 * (n - 1) / n * size / bw


def _tree(size, n: int, alpha_s: float, bw: float):
    # A world size that is not a power of two needs ceil(log2 n) rounds; the
    # extra fix-up step real libraries add for it is left out.
    rounds = math.ceil(math.log2(n)) if n > 1 else 0
    return 2 * rounds * alpha_s + 2 * (n - 1) / n * size / bw


def allreduce_time(
    nbytes,
    n: int,
    alpha_s: float,
    bandwidth_Bps: float,
    algorithm: str = "ring",
    **topology,
):
    """Seconds for an all-reduce of ``nbytes`` over ``n`` ranks (alpha–beta model).

    Args:
        nbytes: bytes each rank contributes (a number or an array), >= 0.
        n: ranks (GPUs) taking part, in [1, 10**7].
        alpha_s: latency of one step in seconds, >= 0; for ``hierarchical``, of
            one step between nodes.
        bandwidth_Bps: bytes/s per rank and direction, > 0 (``inf`` allowed); for
            ``hierarchical``, each GPU's share of its node's network bandwidth
            (the node's bandwidth / ``gpus_per_node``).
        algorithm: ``"ring"``, ``"tree"`` (recursive halving and doubling) or
            ``"hierarchical"``.
        **topology: ``hierarchical`` only, all three required: ``gpus_per_node``
            (int in [1, n] dividing ``n``), ``intra_alpha_s`` (s, >= 0) and
            ``intra_bandwidth_Bps`` (bytes/s per GPU and direction in a node, > 0).

    Returns:
        Seconds, with the shape of ``nbytes`` (0 for a single rank).
    """
    check_choice("algorithm", algorithm, ALGORITHMS)
    n = check_int("n", n, 1, 10**7)
    alpha_s = check_float("alpha_s", alpha_s, 0.0)
    bw = _bandwidth("bandwidth_Bps", bandwidth_Bps)
    size = np.asarray(nbytes, dtype=float)
    if np.any(~np.isfinite(size)) or np.any(size < 0):
        raise ValueError(f"nbytes={nbytes!r} must be finite and >= 0 bytes")
    allowed = set(_TOPOLOGY) if algorithm == "hierarchical" else set()
    if set(topology) - allowed:
        raise ValueError(
            f"unexpected argument(s) {sorted(set(topology) - allowed)} for "
            f"algorithm={algorithm!r}; only 'hierarchical' takes {list(_TOPOLOGY)}"
        )
    if algorithm == "ring":
        t = _ring(size, n, alpha_s, bw)
    elif algorithm == "tree":
        t = _tree(size, n, alpha_s, bw)
    else:
        missing = [k for k in _TOPOLOGY if k not in topology]
        if missing:
            raise ValueError(f"algorithm='hierarchical' needs {missing}")
        g = check_int("gpus_per_node", topology["gpus_per_node"], 1, n)
        if n % g:
            raise ValueError(
                f"gpus_per_node={g} must divide n={n}: every node holds as many GPUs"
            )
        intra_alpha = check_float("intra_alpha_s", topology["intra_alpha_s"], 0.0)
        intra_bw = _bandwidth("intra_bandwidth_Bps", topology["intra_bandwidth_Bps"])
        # Reduce-scatter plus all-gather inside a node cost one ring over g GPUs.
        t = _ring(size, g, intra_alpha, intra_bw)
        if n // g > 1:  # each GPU all-reduces its 1/g share across the nodes
            t = t + _ring(size / g, n // g, alpha_s, bw)
    t = np.asarray(t, dtype=float)
    return float(t) if t.ndim == 0 else t


def allreduce_busbw(nbytes, n: int, time_s):
    """Bus bandwidth of an all-reduce, as nccl-tests reports it.

    ``busbw = nbytes / time_s * 2 (n-1)/n``: for a ring, the rate each link had to
    sustain, which makes results for different ``n`` comparable with a link's peak.

    Args:
        nbytes: bytes per rank, > 0.
        n: ranks, >= 1.
        time_s: seconds the all-reduce took, > 0.

    Returns:
        Bytes/s, with the shape of ``nbytes`` and ``time_s`` broadcast together.
    """
    n = check_int("n", n, 1)
    size = np.asarray(nbytes, dtype=float)
    t = np.asarray(time_s, dtype=float)
    if np.any(~(size > 0)) or np.any(~(t > 0)) or np.any(~np.isfinite(t)):
        raise ValueError(f"nbytes={nbytes!r} and time_s={time_s!r} must be > 0")
    bw = size / t * 2 * (n - 1) / n
    return float(bw) if bw.ndim == 0 else bw


TABLE = "collective_busbw_published"


@cache
def _sweep(system: str, op: str):
    """Sizes (bytes) and busbw (bytes/s) of one published system, sorted by size."""
    df = published.load(TABLE)
    df = df[(df["op"] == op) & df["size_bytes"].notna()]
    names = sorted(df["system"].unique())
    if system not in names:
        raise ValueError(
            f"system={system!r} publishes no sized {op} figure; choose one of {names}"
            " (cl.published.collective_systems() lists them)"
        )
    pts = df[df["system"] == system].sort_values("size_bytes")
    sizes = pts["size_bytes"].to_numpy(float)
    if len(np.unique(sizes)) != len(sizes):
        raise ValueError(f"system={system!r} has two figures at one size in {TABLE}")
    return sizes, pts["busbw_Bps"].to_numpy(float)


def bus_bandwidth(nbytes, system: str, op: str = "all_reduce"):
    """Published bus bandwidth of a named system at a message size (bytes/s).

    Between two published sizes the bus bandwidth is interpolated linearly in
    log2(size), so it is exact at every published size and monotone between
    neighbours. Outside the published range:

    * above the largest size: that size's figure (the plateau);
    * below the smallest: the alpha–beta (Hockney) shape
      ``busbw = B S / (S + h)`` through the two smallest points, which falls
      toward 0 for tiny messages; if those two points rise faster than in
      proportion to size (a latency-bound end, ``h <= 0``), the time of the
      smallest published all-reduce is kept as a floor, ``busbw ∝ S``. A system
      with a single published size has no curve below it: that is an error.

    Args:
        nbytes: message size in bytes per rank (a number or an array), >= 0.
        system: a name from ``cl.published.collective_systems()``, e.g.
            ``"8xH200-NVLS-nccl2.27.7"``.
        op: the collective (``"all_reduce"``).

    Returns:
        Bytes/s with the shape of ``nbytes`` (0 at 0 bytes).
    """
    size = np.asarray(nbytes, dtype=float)
    if np.any(~np.isfinite(size)) or np.any(size < 0):
        raise ValueError(f"nbytes={nbytes!r} must be finite and >= 0 bytes")
    sizes, bw = _sweep(system, op)
    smallest = sizes[0]
    below = (size < smallest) & (size > 0)
    if np.any(below) and len(sizes) < 2:
        raise ValueError(
            f"nbytes={nbytes!r}: system={system!r} publishes one size only "
            f"({smallest:.0f} bytes); allowed nbytes >= {smallest:.0f} or 0, or "
            "choose a system with a sweep"
        )
    log_s = np.log2(np.where(size > 0, size, smallest))
    out = np.atleast_1d(np.interp(log_s, np.log2(sizes), bw))  # plateau at ends
    below = np.atleast_1d(below)
    if np.any(below):
        (s1, s2), (b1, b2) = sizes[:2], bw[:2]
        denom = b1 / s1 - b2 / s2
        h = (b2 - b1) / denom if denom > 0 else np.inf
        s = np.atleast_1d(size)[below]
        if np.isfinite(h) and h > 0:
            out[below] = b1 * (s1 + h) / s1 * s / (s + h)
        else:  # latency-bound end: no faster than the smallest published one
            out[below] = b1 * s / s1
    out = np.where(size > 0, out.reshape(size.shape), 0.0)
    return float(out) if out.ndim == 0 else out


def ring_bus_bandwidth(nbytes, plateau_system: str, shape_system: str):
    """A ring's bus bandwidth where only its plateau is published (bytes/s).

    ``shape_system``'s measured sweep gives the share of its own plateau a
    ring reaches at each size; that share times ``plateau_system``'s plateau
    is the curve. The book uses it for the 8 x H200 ring (published at 8 and
    16 GiB only) on the 8 x A100 ring's twenty sizes. A faster link reaches
    its plateau at larger messages (the half-bandwidth size is latency x
    bandwidth), so on a faster ``plateau_system`` this curve is, if anything,
    optimistic below the plateau.

    Args:
        nbytes: message size in bytes per rank (a number or an array), >= 0.
        plateau_system: a published system whose largest size sets the plateau.
        shape_system: a published system with a sweep (two sizes or more).

    Returns:
        Bytes/s with the shape of ``nbytes``.
    """
    sizes, bw = _sweep(shape_system, "all_reduce")
    if len(sizes) < 3:
        raise ValueError(
            f"shape_system={shape_system!r} publishes {len(sizes)} sizes; a ring's "
            "shape needs a sweep of at least 3"
        )
    plateau = _sweep(plateau_system, "all_reduce")[1][-1]
    out = (
        np.asarray(bus_bandwidth(nbytes, shape_system), dtype=float) / bw[-1] * plateau
    )
    return float(out) if out.ndim == 0 else out


def allreduce_time_published(nbytes, n: int, system: str):
    """Seconds for an all-reduce of ``nbytes`` over ``n`` ranks at published busbw.

    ``t = 2 (n-1)/n * nbytes / bus_bandwidth(nbytes, system)``: the nccl-tests
    definition of bus bandwidth solved for time. The busbw is the system's at
    its own GPU count (see ``cl.published.collective_systems()``); for another
    ``n`` it is an approximation, best for ``n`` near that count.

    Args:
        nbytes: bytes each rank contributes (a number or an array), >= 0.
        n: ranks taking part, in [1, 10**7] (1 costs nothing).
        system: a published system's name.

    Returns:
        Seconds, with the shape of ``nbytes``.
    """
    n = check_int("n", n, 1, 10**7)
    size = np.asarray(nbytes, dtype=float)
    busbw = np.asarray(bus_bandwidth(size, system), dtype=float)
    safe = np.where(busbw > 0, busbw, 1.0)
    t = np.where(size > 0, 2 * (n - 1) / n * size / safe, 0.0)
    return float(t) if t.ndim == 0 else t


__all__ = [
    "ALGORITHMS",
    "NVLINK_DOMAINS",
    "allreduce_busbw",
    "allreduce_time",
    "allreduce_time_published",
    "ring_bus_bandwidth",
    "alpha_beta_time",
    "bus_bandwidth",
    "on_nvlink",
    "scale_up_size",
]
