"""Low precision: fp16, bf16 and FP8, loss scaling, scaled all-gathers.

Its code is reached as ``cl.precision.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solution: the per-tensor scale that fits a tensor into an FP8
  format.
- ``chart``: Charts of number formats: each format's range, and a loss's gradients
  against it.
- ``check``: Checks for the precision lab: loss scaling, underflow, FP8 error, a scale.
- ``diagram``: The bits of each floating-point format training uses, to scale.
- ``measure``: Low precision measured: fp16 under- and overflow, loss scaling, FP8
  matmuls.
- ``widget``: Widget: pick a loss scale; see which gradients fp16 and bf16 keep.
"""

from clusterlab.core.lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
