"""Tensor parallelism's price: its all-reduce time against compute, per degree.

A sweep of the planner's model (:func:`~clusterlab.models.planner.plan_row`):
compute at the published matmul efficiency; four all-reduces of one
micro-batch's activations per layer, at the published NVLink bus bandwidth for
their message size inside a node and at the network link's rate across nodes,
none of it hidden behind compute. ``cl.viz.tensor_parallel`` draws it.
"""

from __future__ import annotations

import pandas as pd

from .._validate import check_int
from .compute import LLAMA2_7B, LLAMA2_13B, LLAMA2_70B
from .planner import plan_row

__all__ = ["TP_MODELS", "tp_cost_sweep"]

#: The models the explorer offers, by name.
TP_MODELS = {m.name: m for m in (LLAMA2_7B, LLAMA2_13B, LLAMA2_70B)}


def tp_cost_sweep(
    models=tuple(TP_MODELS),
    tp_values=(1, 2, 4, 8, 16, 32),
    n_gpus: int = 64,
    global_batch: int = 512,
    gpus_per_node: int = 8,
) -> pd.DataFrame:
    """Compute and TP all-reduce seconds per step for each model and TP degree.

    The GPUs not used by tensor parallelism do data parallelism (ZeRO-3, so that
    every plan fits), with no pipeline; sequences of the model's context length,
    one sequence per micro-batch.

    Args:
        models: names from ``TP_MODELS``.
        tp_values: tensor-parallel degrees, each dividing ``n_gpus``.
        n_gpus: GPUs in all, >= 1.
        global_batch: sequences per step, >= 1.
        gpus_per_node: GPUs joined by NVLink, >= 1.

    Returns:
        DataFrame: ``model, tp, crosses_node, compute_s, tp_comm_s, tp_share``.
    """
    n = check_int("n_gpus", n_gpus, 1)
    g = check_int("gpus_per_node", gpus_per_node, 1)
    rows = []
    for name in models:
        if name not in TP_MODELS:
            raise ValueError(f"model={name!r} is not one of {list(TP_MODELS)}")
        for tp in tp_values:
            if n % check_int("tp", tp, 1, n):
                raise ValueError(f"tp={tp} must divide n_gpus={n}")
            r = plan_row(
                TP_MODELS[name],
                tp=tp,
                pp=1,
                dp=n // tp,
                zero_stage=3,
                recompute="selective",
                sequence_parallel=False,
                global_batch=global_batch,
                gpus_per_node=g,
            )
            comm, comp = r["tp_comm_s"], r["compute_s"]
            rows.append(
                dict(
                    model=name,
                    tp=tp,
                    crosses_node=tp > g,
                    compute_s=comp,
                    tp_comm_s=comm,
                    tp_share=comm / (comm + comp),
                )
            )
    return pd.DataFrame(rows)
