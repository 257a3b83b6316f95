"""Tensor parallelism's price: its all-reduce time against compute, per degree.

A sweep of the planner's model (:func:`~clusterlab.models.planner.plan_row`):
compute at the published matmul efficiency; four all-reduces of one
micro-batch's activations per layer, at the published NVLink bus bandwidth for
their message size inside a node and at the network link's rate across nodes,
none of it hidden behind compute. ``cl.tensor_parallel.chart`` draws it.

:func:`tp_mlp_allreduces` is the same model at the size of one MLP block: the
collectives Megatron's split needs (one all-reduce of the block's activations
forward, ``g``, one backward, ``f``), and :func:`tp_bytes_agree` compares them
with collectives counted on real ranks.
"""

from __future__ import annotations

import pandas as pd

from clusterlab.core.validate import check_int
from clusterlab.models.compute import LLAMA2_7B, LLAMA2_13B, LLAMA2_70B
from clusterlab.models.planner import plan_row

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


def tp_mlp_allreduces(
    batch: int, seq: int, hidden: int, value_bytes: int = 4, blocks: int = 1
) -> list[dict]:
    """The collectives a column-then-row tensor-parallel MLP needs, in order.

    Per block: one all-reduce of the output's ``batch * seq * hidden`` values
    in the forward pass and one of the input's gradient in the backward pass,
    whatever the number of ranks (backward runs the blocks in reverse order).

    Args:
        batch, seq, hidden: the activations' shape, each >= 1.
        value_bytes: bytes per value (4 for fp32, 2 for bf16), >= 1.
        blocks: MLP blocks in a row, >= 1.

    Returns:
        A list of ``{"op", "phase", "bytes"}``, forward ones first.
    """
    nbytes = (
        check_int("batch", batch, 1)
        * check_int("seq", seq, 1)
        * check_int("hidden", hidden, 1)
        * check_int("value_bytes", value_bytes, 1)
    )
    n = check_int("blocks", blocks, 1)
    one = {"op": "all_reduce", "bytes": nbytes}
    return [dict(one, phase="forward") for _ in range(n)] + [
        dict(one, phase="backward") for _ in range(n)
    ]


def tp_bytes_agree(counted, predicted) -> tuple[bool, str]:
    """Whether collectives counted on a rank are exactly the model's.

    Args:
        counted: records ``{"op", "phase", "bytes"}`` of one rank, in order.
        predicted: the model's records (:func:`tp_mlp_allreduces`).

    Returns:
        ``(ok, message)``: the message says what differs (the count, an
        operation, a phase or a size).
    """
    keys = ("op", "phase", "bytes")
    got = [tuple(r[k] for k in keys) for r in counted]
    want = [tuple(r[k] for k in keys) for r in predicted]
    if got == want:
        total = sum(r[2] for r in got)
        return True, f"{len(got)} collectives, {total:,} bytes, as the model says"
    if len(got) != len(want):
        return False, f"counted {len(got)} collectives, the model {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if g != w:
            return False, f"collective {i + 1}: counted {g}, the model {w}"
    return False, "the collectives differ"  # pragma: no cover - unreachable


__all__ = ["TP_MODELS", "tp_bytes_agree", "tp_cost_sweep", "tp_mlp_allreduces"]
