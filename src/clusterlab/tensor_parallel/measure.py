"""Counting what tensor parallelism sends, from below ``torch.distributed``.

``count_collectives`` (``cl.core.counting``, kept here under its first name)
watches the operators that reach PyTorch's dispatcher and records every c10d
collective with the bytes of the tensors handed to it. It knows nothing of the
log that ``TensorParallelMLP`` keeps: the two can be compared.

``tp_count_worker`` runs the tensor-parallel MLP's forward and backward under
that counter.
"""

from __future__ import annotations

from clusterlab.core.counting import count_collectives


def tp_count_worker(rank, world_size, batch=2, seq=8, hidden=16, ffn=64, seed=0):
    """One rank of the tensor-parallel MLP, its collectives counted from below.

    Returns:
        dict: ``counted`` (records of :class:`count_collectives`) and ``logged``
        (the MLP's own log), for the same forward and backward pass.
    """
    from clusterlab.tensor_parallel.ranks import tp_mlp_inputs

    x, tp = tp_mlp_inputs(rank, world_size, batch, seq, hidden, ffn, seed)
    with count_collectives() as counter:
        out = tp(x)
        (out.pow(2).sum() / 2).backward()
    return {"counted": counter.records, "logged": list(tp.comm_log)}


__all__ = ["count_collectives", "tp_count_worker"]
