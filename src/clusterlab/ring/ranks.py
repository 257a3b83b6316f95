"""Ring all-reduce built from point-to-point messages (the teaching version).

Each of the ``n`` ranks cuts its tensor into ``n`` chunks and passes chunks to
its right-hand neighbour around a ring, in two phases of ``n - 1`` steps:

* **reduce-scatter**: at each step a rank sends one chunk right, receives one
  from the left and adds it in; afterwards rank ``r`` holds the full sum of
  chunk ``(r + 1) % n``;
* **all-gather**: the finished chunks travel once more around the ring, each
  received chunk overwriting the stale one, until every rank holds every sum.

Every rank sends about ``2 (n - 1) / n`` of the tensor in total, however large
``n`` is: the reason NCCL uses rings for large messages. ``ring_bytes_sent``
gives that count exactly; pass ``stats={}`` to ``ring_allreduce`` to count the
bytes actually handed to ``send``.

The same code runs on gloo (CPU) and NCCL (GPU): the sends and receives of a
step are posted together with ``batch_isend_irecv`` so neither backend waits on
a send whose matching receive has not been posted yet.

A slow link is one keyword away: ``send_delay_s`` (seconds per message) and
``send_Bps`` (a bandwidth cap, bytes/s) make this rank wait
``send_delay_s + bytes / send_Bps`` before each of its sends, as if the hop to
its right-hand neighbour were that much slower. Pass them on one rank only and
the ring has one slow hop; the ring lab measures that the whole ring then runs
at that hop's pace.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from clusterlab.core.validate import check_float, check_int


def ring_chunk_sizes(numel: int, world_size: int) -> list[int]:
    """Elements in each of the ``world_size`` chunks of a tensor of ``numel``.

    The first ``numel % world_size`` chunks get one extra element (the split that
    ``torch.tensor_split`` makes); when ``numel < world_size`` some chunks are empty.

    Args:
        numel: elements in the tensor, >= 0.
        world_size: ranks in the ring, >= 1.

    Returns:
        ``world_size`` chunk lengths (elements) that add up to ``numel``.
    """
    numel = check_int("numel", numel, 0)
    n = check_int("world_size", world_size, 1)
    base, extra = divmod(numel, n)
    return [base + (1 if i < extra else 0) for i in range(n)]


def ring_bytes_sent(numel: int, element_size: int, world_size: int, rank: int) -> int:
    """Bytes one rank sends during a ring all-reduce of ``numel`` elements.

    In the reduce-scatter rank ``r`` sends chunks ``r, r-1, ..., r-n+2`` (every
    chunk but ``r+1``); in the all-gather it sends ``r+1, r, ..., r-n+3`` (every
    chunk but ``r+2``). For ``numel`` divisible by ``n`` that is exactly
    ``2 (n - 1) / n`` of the tensor.

    Args:
        numel: elements in the tensor, >= 0.
        element_size: bytes per element, >= 1 (4 for float32).
        world_size: ranks in the ring, >= 1.
        rank: this rank, in [0, world_size - 1].

    Returns:
        Bytes sent by ``rank`` (0 for a ring of one).
    """
    element_size = check_int("element_size", element_size, 1)
    sizes = ring_chunk_sizes(numel, world_size)
    n = len(sizes)
    rank = check_int("rank", rank, 0, n - 1)
    if n == 1:
        return 0
    total = sum(sizes)
    elements = (total - sizes[(rank + 1) % n]) + (total - sizes[(rank + 2) % n])
    return elements * element_size


def _ring(group):
    """This rank, the ring's size and the global ranks of both neighbours."""
    rank = dist.get_rank(group)
    n = dist.get_world_size(group)
    right, left = (rank + 1) % n, (rank - 1) % n
    if group is not None:  # P2P ops address peers by their global rank
        right = dist.get_global_rank(group, right)
        left = dist.get_global_rank(group, left)
    return rank, n, right, left


def _hop(send_delay_s: float = 0.0, send_Bps: float | None = None):
    """A validated ``(delay_s, Bps)`` pair for this rank's hop to the right."""
    delay = check_float("send_delay_s", send_delay_s, 0.0, 60.0)
    if send_Bps is not None:
        send_Bps = check_float("send_Bps", send_Bps, 1.0, 1e15)
    return delay, send_Bps


def _wait_for_link(hop, nbytes: int) -> None:
    """Sleep as long as a slow hop would take longer to carry ``nbytes``."""
    delay, bps = hop
    extra = delay + (nbytes / bps if bps else 0.0)
    if extra > 0:
        time.sleep(extra)


def _exchange(send_buf, recv_buf, right, left, group, stats, hop=(0.0, None)):
    """Send ``send_buf`` right while receiving ``recv_buf`` from the left."""
    # An empty chunk is neither sent nor received: every rank splits the same way,
    # so the neighbour skips the matching receive (or send) too.
    if send_buf.numel():
        _wait_for_link(hop, send_buf.numel() * send_buf.element_size())
    ops = []
    if send_buf.numel():
        ops.append(dist.P2POp(dist.isend, send_buf, right, group))
    if recv_buf.numel():
        ops.append(dist.P2POp(dist.irecv, recv_buf, left, group))
    if not ops:
        return
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    if stats is not None and send_buf.numel():
        nbytes = send_buf.numel() * send_buf.element_size()
        stats["bytes_sent"] = stats.get("bytes_sent", 0) + nbytes
        stats["messages"] = stats.get("messages", 0) + 1


def ring_reduce_scatter(
    chunks, group=None, stats=None, *, send_delay_s=0.0, send_Bps=None
):
    """Phase 1: afterwards this rank's chunk ``(rank + 1) % n`` holds the full sum.

    Args:
        chunks: this rank's ``n`` contiguous 1-D chunks (views into its tensor),
            split the same way on every rank; summed in place.
        group: the process group (``None``: the default group).
        stats: optional dict; ``bytes_sent`` and ``messages`` are added to it.
        send_delay_s: seconds this rank waits before each send, in [0, 60]
            (a slow hop to its right-hand neighbour; 0: none).
        send_Bps: a bandwidth cap on that hop, bytes/s, in [1, 1e15] (None:
            none): each send also waits ``bytes / send_Bps``.

    Returns:
        ``chunks``, modified in place.
    """
    hop = _hop(send_delay_s, send_Bps)
    rank, n, right, left = _ring(group)
    scratch = torch.empty_like(chunks[0])  # chunk 0 is the longest
    for step in range(n - 1):
        send_idx, recv_idx = (rank - step) % n, (rank - step - 1) % n
        incoming = scratch[: chunks[recv_idx].numel()]
        _exchange(chunks[send_idx], incoming, right, left, group, stats, hop)
        chunks[recv_idx] += incoming
    return chunks


def ring_allgather(chunks, group=None, stats=None, *, send_delay_s=0.0, send_Bps=None):
    """Phase 2: pass each finished chunk around the ring until every rank has all.

    Expects the state ``ring_reduce_scatter`` leaves: rank ``r`` owns the final
    value of chunk ``(r + 1) % n``. At step ``s`` rank ``r`` sends chunk
    ``(r + 1 - s) % n`` right and receives chunk ``(r - s) % n`` from the left,
    overwriting its stale copy.

    Args:
        chunks: this rank's ``n`` contiguous 1-D chunks; overwritten in place.
        group: the process group (``None``: the default group).
        stats: optional dict; ``bytes_sent`` and ``messages`` are added to it.
        send_delay_s, send_Bps: a slow hop to the right, as in
            ``ring_reduce_scatter``.

    Returns:
        ``chunks``, modified in place.
    """
    hop = _hop(send_delay_s, send_Bps)
    rank, n, right, left = _ring(group)
    for step in range(n - 1):
        send_idx, recv_idx = (rank + 1 - step) % n, (rank - step) % n
        _exchange(chunks[send_idx], chunks[recv_idx], right, left, group, stats, hop)
    return chunks


def ring_allreduce(
    tensor: torch.Tensor,
    group=None,
    *,
    stats=None,
    send_delay_s: float = 0.0,
    send_Bps: float | None = None,
) -> torch.Tensor:
    """Sum ``tensor`` over all ranks, in place, with a ring of send/recv messages.

    Gives the same result as ``dist.all_reduce(tensor)`` (SUM), up to
    floating-point rounding, because each chunk is added in a different order.

    Args:
        tensor: any shape, any length (need not divide by the world size), on the
            device the backend uses; float32, float64 or another dtype with ``+``.
        group: the process group (``None``: the default group).
        stats: optional dict; ``bytes_sent`` (bytes this rank passed to send) and
            ``messages`` (sends it made) are added to it.
        send_delay_s: seconds this rank waits before each of its sends, in
            [0, 60]: its hop to the right-hand neighbour made slower (0: none).
        send_Bps: a bandwidth cap on that hop, bytes/s, in [1, 1e15] (None:
            none): each send also waits ``bytes / send_Bps``.

    Returns:
        ``tensor``, now holding the sum over ranks.
    """
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"tensor={tensor!r} must be a torch.Tensor")
    slow = {"send_delay_s": send_delay_s, "send_Bps": send_Bps}
    _hop(**slow)  # a bad value fails here, on every world size
    n = dist.get_world_size(group)
    if n == 1 or tensor.numel() == 0:
        return tensor
    # Work on a flat contiguous copy only if the tensor is not contiguous already.
    flat = tensor.view(-1) if tensor.is_contiguous() else tensor.contiguous().view(-1)
    chunks = list(torch.tensor_split(flat, n))
    ring_reduce_scatter(chunks, group, stats, **slow)
    ring_allgather(chunks, group, stats, **slow)
    if flat.data_ptr() != tensor.data_ptr() or not tensor.is_contiguous():
        tensor.copy_(flat.view_as(tensor))
    return tensor


__all__ = [
    "ring_allgather",
    "ring_allreduce",
    "ring_bytes_sent",
    "ring_chunk_sizes",
    "ring_reduce_scatter",
]
