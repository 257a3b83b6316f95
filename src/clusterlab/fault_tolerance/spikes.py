"""A loss spike from one bad batch: train through it, find it, skip it.

Fleets meet failures that crash nothing: a corrupted shard of data, a GPU that
computes wrong numbers without an error (silent data corruption), an overflow.
The loss jumps, and the damage to the weights can outlast the step. The usual
triage: detect the spike against the recent past, skip the batch (or roll back
to a checkpoint before it), and go on.

``train`` runs a small regression model for real, with one batch corrupted (its
targets scaled by ``BAD_SCALE``) at a step drawn from the seed, so a reader does
not know where it is; ``find_spikes`` flags a step whose loss is several times
the median of the steps before it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from clusterlab.core.validate import check_float, check_int

#: How much the bad batch's targets are scaled (a corrupted shard).
BAD_SCALE = 30.0


def bad_step_of(seed: int, steps: int) -> int:
    """The step the bad batch comes at, drawn from ``seed`` (in the second half)."""
    rng = np.random.default_rng(check_int("seed", seed, 0))
    return int(rng.integers(steps // 2, steps - 10))


def train(
    steps: int = 160, seed: int = 0, skip=(), corrupt: bool = True
) -> pd.DataFrame:
    """Train a small MLP on a fixed regression task; one batch may be corrupted.

    Args:
        steps: optimizer steps, in [40, 10000].
        seed: seeds the weights, the data and the bad step.
        skip: steps whose batch is skipped (no update).
        corrupt: put the bad batch in (False: the clean run).

    Returns:
        DataFrame ``step, loss, skipped`` (the loss of each step's batch before
        its update; a skipped step's loss is still measured).
    """
    import torch

    steps = check_int("steps", steps, 40, 10_000)
    bad = bad_step_of(seed, steps)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1)
    )
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(seed + 1)
    w_true = torch.randn(16, 1, generator=gen)
    rows, skip = [], {int(s) for s in skip}
    for step in range(steps):
        x = torch.randn(32, 16, generator=gen)
        y = torch.tanh(x @ w_true / 4)
        if corrupt and step == bad:
            y = y * BAD_SCALE
        loss = (model(x) - y).pow(2).mean()
        rows.append((step, float(loss.detach()), step in skip))
        if step in skip:
            continue
        opt.zero_grad()
        loss.backward()
        opt.step()
    return pd.DataFrame(rows, columns=["step", "loss", "skipped"])


def find_spikes(losses, window: int = 20, ratio: float = 5.0) -> list[int]:
    """Steps whose loss is over ``ratio`` times the median of the ``window`` before.

    A rule relative to the recent past: a loss that is merely high early in
    training is not a spike, and a jump late in training, when losses are
    small, is. The steps right after a spike can be flagged too (the damage);
    triage acts on the first.

    Args:
        losses: the loss of each step, in order.
        window: steps of history each one is compared with, in [5, 1000].
        ratio: how many times the recent median makes a spike, in (1, 1000].
    """
    window = check_int("window", window, 5, 1000)
    ratio = check_float("ratio", ratio, 1.0, 1000.0, low_inclusive=False)
    x = np.asarray(losses, dtype=float)
    return [
        i for i in range(window, len(x)) if x[i] > ratio * np.median(x[i - window : i])
    ]


def damage(spiked: pd.DataFrame, clean: pd.DataFrame, after: int, span: int = 20):
    """How far a run's loss sits above the clean run's in the ``span`` steps after
    step ``after`` (the ratio of their mean losses there)."""
    part = slice(after + 1, after + 1 + span)
    a = spiked["loss"].to_numpy()[part].mean()
    b = clean["loss"].to_numpy()[part].mean()
    return float(a / b)


__all__ = ["BAD_SCALE", "bad_step_of", "damage", "find_spikes", "train"]
