"""Counting what collectives send, from below ``torch.distributed``.

``count_collectives`` watches the operators that reach PyTorch's dispatcher
and records every c10d collective (``allreduce_``, ``_allgather_base_``,
``_reduce_scatter_base_``, ``broadcast_``, ``alltoall_base_``, ``send``, ...)
with the bytes of the tensors handed to it. It sits below
``torch.distributed``'s Python functions, so it sees every collective whoever
calls it, and it knows nothing of any count a topic's code keeps itself: the
two can be compared (the tensor-parallel, experts and long-context labs do).
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# c10d operator name -> the collective it is, as the models name them.
_C10D_OPS = {
    "allreduce_": "all_reduce",
    "allreduce_coalesced_": "all_reduce",
    "_allgather_base_": "all_gather",
    "allgather_": "all_gather",
    "_reduce_scatter_base_": "reduce_scatter",
    "reduce_scatter_": "reduce_scatter",
    "broadcast_": "broadcast",
    "alltoall_base_": "all_to_all",
    "send": "send",
    "recv_": "recv",
}


def _first_tensors(arg) -> list[torch.Tensor]:
    if isinstance(arg, torch.Tensor):
        return [arg]
    if isinstance(arg, (list, tuple)):
        return [t for a in arg for t in _first_tensors(a)]
    return []


#: c10d operators whose first argument is the output, their second the input
_OUTPUT_FIRST = {"_allgather_base_", "allgather_", "_reduce_scatter_base_",
                 "reduce_scatter_", "alltoall_base_"}  # fmt: skip


def _nbytes(arg) -> int:
    return sum(t.numel() * t.element_size() for t in _first_tensors(arg))


def _split_bytes(sent: torch.Tensor, group, input_splits) -> list[int]:
    """Bytes of ``sent`` bound for each rank of an all-to-all's group."""
    row = sent[0].numel() * sent.element_size() if sent.dim() and len(sent) else 0
    if len(input_splits):
        return [int(n) * row for n in input_splits]
    world = torch.distributed.ProcessGroup.unbox(group).size()
    return [sent.numel() * sent.element_size() // world] * world


class count_collectives(TorchDispatchMode):  # noqa: N801 - used like a function
    """Context manager: ``with count_collectives() as c: ...``; then ``c.records``.

    Each record is ``{"op", "bytes", "phase", "dtype"}``: the collective, the
    bytes of the tensors it was given to send (its input, which all-reduce also
    overwrites), ``"backward"`` when autograd's engine ran it, else
    ``"forward"``, and the sent tensor's dtype. An all-to-all's record also has
    ``split_bytes``: the bytes bound for each rank, in rank order, read from the
    operator's own input splits (even splits where it was given none). An
    all-gather's has ``received_bytes``: its output's bytes less its own input's.
    """

    def __init__(self):
        super().__init__()
        self.records: list[dict] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if func.namespace == "c10d" and name in _C10D_OPS:
            # allreduce_/broadcast_/send take a list of tensors first; the
            # gathers, scatters and all-to-all take (output, input): the input
            # is what this rank sends.
            sent = args[1] if name in _OUTPUT_FIRST else args[0]
            nbytes = _nbytes(sent)
            phase = "backward" if torch._C._current_graph_task_id() >= 0 else "forward"
            record = {"op": _C10D_OPS[name], "bytes": nbytes, "phase": phase}
            tensors = _first_tensors(sent)
            record["dtype"] = str(tensors[0].dtype) if tensors else None
            if name == "alltoall_base_":
                record["split_bytes"] = _split_bytes(args[1], args[2], args[4])
            if _C10D_OPS[name] == "all_gather":  # what came from the other ranks
                record["received_bytes"] = _nbytes(args[0]) - nbytes
            self.records.append(record)
        return func(*args, **(kwargs or {}))


__all__ = ["count_collectives"]
