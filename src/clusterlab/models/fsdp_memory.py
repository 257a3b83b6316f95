"""FSDP's peak memory during forward and backward, for an MLP of equal layers.

ZeRO-3's ``16 N / d`` (:func:`~clusterlab.models.memory.training_memory`)
counts what a rank keeps between steps. While a step runs, a rank holds more,
and :func:`fsdp_peak_bytes` says how much, for ``n_layers`` equal ``Linear``
layers of ``layer_bytes`` each (fp32 weights and biases), each its own FSDP unit,
on ``world_size`` ranks, with ``act_bytes`` per saved activation (one
``batch x width`` fp32 tensor per layer: a ReLU's output, or the model's).

The rise above the state held before the step is the largest, over the backward
pass's position ``k`` (layers already done), of three terms:

- activations: the ``L - k`` saved ones backward has not used yet, the
  gradient coming into the layer and the one it computes for the layer below,
  ``(L - k + 2) * act_bytes``;
- gradient shards already reduce-scattered: ``k * layer_bytes / d``;
- gathered layers, ``layer_bytes`` each. With resharding
  (``reshard_after_forward=True``) the layer being differentiated has its whole
  weights and its whole weight gradient (2), FSDP keeps the previous layer's
  reduce-scatter buffer until the next reduce-scatter (1, from ``k = 1``), and a
  prefetched layer adds 1. Without resharding every layer not yet done keeps its
  whole weights from the forward pass (``L - k``), plus the gradient (1) and the
  kept reduce-scatter buffer (1, from ``k = 1``).

The peak of the step is the state held before it (``weights + optimizer``, both
``1/d``) plus that rise. Not counted: the loss, the input's gradient of the
first layer (not computed), frees that come a little earlier or later than the
formula says, and the temporary copy a CPU (gloo) collective makes and frees
from its own thread; the FSDP lab measures them at under one layer in all for
activations of up to half a layer (with larger ones the saved activation is
freed before the next layer's gradient is computed, and the formula counts
up to one activation too many).
"""

from __future__ import annotations

from clusterlab.core.validate import check_int


def fsdp_peak_bytes(
    n_layers: int,
    layer_bytes: int,
    act_bytes: int,
    world_size: int,
    *,
    reshard_after_forward: bool = True,
    prefetch: bool = True,
    activations: bool = True,
) -> dict:
    """Predicted peak bytes per rank of one FSDP training step (see the module).

    Args:
        n_layers: FSDP units (equal ``Linear`` layers), in [1, 10000].
        layer_bytes: bytes of one layer's weights and bias, >= 1.
        act_bytes: bytes of one saved activation (``4 * batch * width``), >= 0.
        world_size: ranks ``d`` sharing the model, in [1, 100000].
        reshard_after_forward: FSDP frees a layer's whole weights after its
            forward and gathers them again in backward.
        prefetch: the next layer's weights are gathered while this one computes.
        activations: count the saved activations (``False`` is the model
            state-only view, for comparison).

    Returns:
        dict of bytes per rank: ``state`` (weights and Adam's moments, 12 bytes
        per 4-byte weight, over ``d``), ``rise`` (the largest extra while the
        step runs), ``peak`` (their sum), ``at_layer`` (``k`` at the peak).
    """
    n = check_int("n_layers", n_layers, 1, 10_000)
    p = check_int("layer_bytes", layer_bytes, 1)
    a = check_int("act_bytes", act_bytes, 0)
    d = check_int("world_size", world_size, 1, 100_000)
    best, at = -1.0, 0
    for k in range(n):
        acts = (n - k + 2) * a if activations else 0
        shards = k * p / d
        kept_buffer = 1 if k >= 1 else 0
        if reshard_after_forward:
            gathered = (2 + kept_buffer + (1 if prefetch else 0)) * p
        else:
            gathered = (n - k + 1 + kept_buffer) * p
        rise = acts + shards + gathered
        if rise > best:
            best, at = rise, k
    state = 3 * n * p / d  # weights, then Adam's two moments of the same size
    return {"state": state, "rise": best, "peak": state + best, "at_layer": at}


__all__ = ["fsdp_peak_bytes"]
