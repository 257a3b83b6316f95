"""Training set-ups that the source essay states, written down once.

The essay's 70B recipe (claim H6) is used by the networks chapter (is its step
communication-bound?), the model-parallelism chapter and the planner (does it
fit, how fast can it go?). Each reads it from here, so that the batch, the
layout and the throughput the essay reports are the same numbers everywhere.

How the essay's figures are read, and why:

- "per-GPU batch 2" is the micro-batch of one model replica: a replica is the
  ``tp * pp = 32`` GPUs that hold one copy of the model, and only the first
  pipeline stage's GPUs see the input tokens. With gradient accumulation 8 and
  32 data-parallel replicas, one optimizer step covers ``2 * 8 * 32 = 512``
  sequences of 4,096 tokens, about 2.1 M tokens (Llama 2's 4 M-token batch is
  the same order).
- Each GPU holds ``1 / (tp * pp) = 1/32`` of the model, so it all-reduces a
  1/32 shard of the gradients with its 31 peers in the other replicas, over its
  own network port (8 ports per node, one per GPU).
- The 150K tokens/s the essay gives is the throughput of the straggler
  incident (claim S1) before it fell to 42K; the essay does not say it was
  measured on this recipe, so the book uses it for H6 only as "the figure the
  same essay reports for a 1,024-GPU job".
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterlab.models.compute import LLAMA2_70B, ModelShape


@dataclass(frozen=True)
class Recipe:
    """A stated training layout: the model, the GPUs and how they are split.

    Attributes:
        name: label for tables.
        model: the model's shape.
        nodes, gpus_per_node: the cluster.
        tp, pp, dp: tensor-, pipeline- and data-parallel degrees.
        micro_batch: sequences per micro-batch of one replica.
        grad_accum: micro-batches per optimizer step.
        recompute: "none", "selective" or "full" (activation checkpointing).
        reported_tokens_per_s: a throughput the source states (None if none).
        source: where the recipe comes from (a claim ID of the ledger).
        zero_stage: how the optimizer state is sharded over ``dp`` (the
            essay does not say; 1, Megatron-LM's distributed optimizer).
        sequence_parallel: sequence parallelism alongside ``tp`` (not stated:
            off).
    """

    name: str
    model: ModelShape
    nodes: int
    gpus_per_node: int
    tp: int
    pp: int
    dp: int
    micro_batch: int
    grad_accum: int
    recompute: str
    reported_tokens_per_s: float | None
    source: str
    zero_stage: int = 1
    sequence_parallel: bool = False

    def __post_init__(self):
        if self.tp * self.pp * self.dp != self.nodes * self.gpus_per_node:
            raise ValueError(
                f"tp*pp*dp={self.tp * self.pp * self.dp} must equal "
                f"nodes*gpus_per_node={self.nodes * self.gpus_per_node}"
            )

    @property
    def n_gpus(self) -> int:
        """GPUs in the job."""
        return self.nodes * self.gpus_per_node

    @property
    def global_batch(self) -> int:
        """Sequences per optimizer step: micro-batch x accumulation x replicas."""
        return self.micro_batch * self.grad_accum * self.dp

    @property
    def tokens_per_step(self) -> int:
        """Tokens per optimizer step."""
        return self.global_batch * self.model.seq_len

    @property
    def grad_shard_params(self) -> float:
        """Parameters whose gradients one GPU all-reduces: N / (tp * pp)."""
        return self.model.n_params / (self.tp * self.pp)


#: The essay's 70B recipe (H6): 128 nodes x 8 H100, TP 8 x PP 4 x DP 32,
#: per-replica micro-batch 2, gradient accumulation 8, activation checkpointing
#: (full recomputation), bf16; 150K tokens/s is the S1 incident's figure.
ESSAY_70B = Recipe(
    name="essay 70B recipe (H6)",
    model=LLAMA2_70B,
    nodes=128,
    gpus_per_node=8,
    tp=8,
    pp=4,
    dp=32,
    micro_batch=2,
    grad_accum=8,
    recompute="full",
    reported_tokens_per_s=150e3,
    source="claims H6 and S1 of the claims ledger",
)


__all__ = ["ESSAY_70B", "Recipe"]
