"""Exercise check: the forward pass of a row-parallel linear layer."""

from __future__ import annotations

import torch

from clusterlab.core.checks import launch_answer, not_attempted, passed

_BATCH, _IN, _OUT = 3, 8, 5


def _problem(seed: int):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(_BATCH, _IN, generator=gen, dtype=torch.float64)
    weight = torch.randn(_OUT, _IN, generator=gen, dtype=torch.float64)
    bias = torch.randn(_OUT, generator=gen, dtype=torch.float64)
    return x, weight, bias


def _rpf_worker(rank, world_size, answer, seed):
    x, weight, bias = _problem(seed)
    step = _IN // world_size
    cols = slice(rank * step, (rank + 1) * step)
    with torch.no_grad():
        got = answer(x[:, cols].clone(), weight[:, cols].clone(), bias.clone())
    partial = x[:, cols] @ weight[:, cols].T
    return {"got": got, "partial": partial}


def _hint(got, expected, partial, bias, n) -> str:
    if torch.allclose(got, partial + bias) or torch.allclose(got, partial):
        return (
            "it holds only this rank's partial sum: add the ranks' partial "
            "products with dist.all_reduce"
        )
    if torch.allclose(got, expected + (n - 1) * bias):
        return (
            f"the bias was counted {n} times: add it after the all-reduce, not before"
        )
    if torch.allclose(got, expected - bias):
        return "the bias is missing: add it once, after the all-reduce"
    return "compute x_local @ weight_local.T, all-reduce it, then add the bias"


def row_parallel_forward(fn, world_sizes=(2, 4)) -> bool:
    """Check the exercise: every rank must hold the whole layer's output."""
    name = "row_parallel_forward"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function row_parallel_forward")
    seed = 1010
    x, weight, bias = _problem(seed)
    expected = x @ weight.T + bias
    for n in world_sizes:
        results = launch_answer(
            name,
            _rpf_worker,
            n,
            "If it ran out of time, check that every rank calls the same collective.",
            answer=fn,
            seed=seed,
        )
        if results is None:
            return not_attempted(name)
        for rank, r in enumerate(results):
            got = r["got"]
            if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
                shape = tuple(got.shape) if isinstance(got, torch.Tensor) else got
                raise AssertionError(
                    f"{name} on {n} ranks: rank {rank} returned {shape}; return the "
                    f"whole output, shape {tuple(expected.shape)} (batch, out)"
                )
            if not torch.allclose(got, expected):
                hint = _hint(got, expected, r["partial"], bias, n)
                raise AssertionError(
                    f"{name} on {n} ranks: rank {rank}'s output differs from the "
                    f"single-process layer; {hint}"
                )
    sizes = " and ".join(str(n) for n in world_sizes)
    return passed(name, f"every rank holds x · Wᵀ + b on {sizes} ranks")


__all__ = ["row_parallel_forward"]
