"""Tensor parallelism: a Megatron-style MLP split over ranks.

Its code is reached as ``cl.tensor_parallel.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solution: the forward pass of a row-parallel linear layer.
- ``chart``: Charts of tensor parallelism's cost: all-reduce time against compute.
- ``check``: Exercise check: the forward pass of a row-parallel linear layer.
- ``diagram``: Tensor and sequence parallelism as pictures: which rank holds which
  shard.
- ``measure``: Counting what tensor parallelism sends, from below ``torch.distributed``.
- ``ranks``: Tensor parallelism by hand: a Megatron-style MLP split over the ranks of a
  group.
- ``widget``: Widget: a model and a GPU count; the price of each TP degree.
"""

from clusterlab.core.lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
