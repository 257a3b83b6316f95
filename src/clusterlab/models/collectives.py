"""The alpha–beta (Hockney) model of sending a message, and all-reduce costs.

A message of ``S`` bytes costs a fixed start-up time ``alpha`` (seconds) plus
``S / beta`` seconds at bandwidth ``beta`` (bytes/s). Every collective-cost
formula in the book is built from this one line:

* **ring** all-reduce over ``n`` ranks: ``2 (n-1) alpha + 2 (n-1)/n * S / B``
  (``n - 1`` steps of reduce-scatter and ``n - 1`` of all-gather, each moving
  ``S / n`` bytes): bandwidth-optimal, but its latency grows with ``n``;
* **tree** (recursive halving and doubling):
  ``2 log2(n) alpha + 2 (n-1)/n * S / B``, the same bytes in fewer steps
  (Thakur, Rabenseifner & Gropp 2005);
* **hierarchical**: reduce-scatter inside each node over its fast links, then
  every GPU all-reduces its ``1/g`` share between the nodes (all ``g`` GPUs of a
  node at once, each on its share of the node's network), then an all-gather
  inside the node.
"""

from __future__ import annotations

import math

import numpy as np

from .._validate import check_choice, check_float, check_int

ALGORITHMS = ("ring", "tree", "hierarchical")
_TOPOLOGY = ("gpus_per_node", "intra_alpha_s", "intra_bandwidth_Bps")


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
