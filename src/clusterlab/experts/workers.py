"""Expert parallelism on real ranks, checked against the layer in one process.

A *case* is a batch of tokens spread unevenly over the ranks, the router's
choices and weights for them, and experts built from a seed: every rank can
rebuild the whole case and keep its own share, and the notebook can run the
same case in one process (:func:`ep_reference`) to compare outputs and
gradients. :func:`ep_worker` runs any number of cases in one launch.

Run it on its own (prints whether each rank agrees with one process)::

    torchrun --nproc-per-node 4 -m clusterlab.experts.workers
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from clusterlab.core.counting import count_collectives
from clusterlab.core.validate import check_int
from clusterlab.experts.layer import (
    expert_slice,
    make_experts,
    moe_reference,
    one_thread,
    route,
)
from clusterlab.experts.ranks import combine, dispatch


def make_case(
    tokens_per_rank,
    n_experts: int,
    top_k: int,
    hidden: int = 8,
    ffn: int = 16,
    seed: int = 0,
    unused_experts=(),
    capacity=None,
) -> dict:
    """A routed batch, the same on every rank: what the workers and the reference share.

    Args:
        tokens_per_rank: tokens of each rank, a list (its length is the world
            size; 0 is allowed).
        n_experts: experts in all; top_k: experts per token.
        hidden, ffn: widths of the tokens and of each expert's inner layer.
        seed: tokens, router scores and experts all come from it.
        unused_experts: experts the router never picks (so they get no token).
        capacity: most copies a rank sends to one expert (None: no limit).

    Returns:
        A dict of the arguments plus ``tokens`` ``[sum T, h]``, ``logits``
        ``[sum T, E]`` and ``grad_out`` (the upstream gradient of the output).
    """
    counts = [check_int("tokens_per_rank", t, 0) for t in tokens_per_rank]
    check_int("top_k", top_k, 1, n_experts - len(unused_experts))
    gen = torch.Generator().manual_seed(seed)
    n = sum(counts)
    logits = torch.randn(n, n_experts, generator=gen)
    logits[:, list(unused_experts)] = float("-inf")
    return {
        "tokens_per_rank": counts,
        "n_experts": n_experts,
        "top_k": top_k,
        "hidden": hidden,
        "ffn": ffn,
        "seed": seed,
        "capacity": capacity,
        "tokens": torch.randn(n, hidden, generator=gen),
        "logits": logits,
        "grad_out": torch.randn(n, hidden, generator=gen),
    }


def _grads(modules) -> list:
    return [[p.grad.detach().cpu().clone() for p in m.parameters()] for m in modules]


def ep_reference(case: dict) -> dict:
    """The case in one process: each rank's share through the whole layer.

    Capacity applies to each rank's share on its own, as in :func:`ep_worker`.

    Returns:
        A dict: ``out`` ``[sum T, h]``, ``grad_tokens``, ``grad_logits`` and
        ``grad_experts`` (a list per expert of its parameters' gradients).
    """
    experts = make_experts(case["n_experts"], case["hidden"], case["ffn"], case["seed"])
    x = case["tokens"].clone().requires_grad_()
    logits = case["logits"].clone().requires_grad_()
    weights, ids = route(logits, case["top_k"])
    outs, start = [], 0
    for t in case["tokens_per_rank"]:
        part = slice(start, start + t)
        outs.append(
            moe_reference(x[part], ids[part], weights[part], experts, case["capacity"])
        )
        start += t
    out = torch.cat(outs)
    (out * case["grad_out"]).sum().backward()
    return {
        "out": out.detach(),
        "grad_tokens": x.grad,
        "grad_logits": logits.grad,
        "grad_experts": _grads(experts),
    }


def _run_case(rank, world_size, case) -> dict:
    device = torch.device("cpu")
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", rank)
    start = sum(case["tokens_per_rank"][:rank])
    mine = slice(start, start + case["tokens_per_rank"][rank])
    full = make_experts(case["n_experts"], case["hidden"], case["ffn"], case["seed"])
    local = [full[e].to(device) for e in expert_slice(len(full), rank, world_size)]
    x = case["tokens"][mine].to(device).requires_grad_()
    logits = case["logits"][mine].to(device).requires_grad_()
    weights, ids = route(logits, case["top_k"])
    t0 = time.perf_counter()
    with count_collectives() as counted:  # below torch.distributed: what c10d sent
        inputs, plan = dispatch(x, ids, case["n_experts"], capacity=case["capacity"])
    dispatch_s = time.perf_counter() - t0
    tokens_moved = [
        r
        for r in counted.records
        if r["op"] == "all_to_all" and r["dtype"] == str(x.dtype)
    ]  # the tokens' exchange (the counts go first, as integers)
    out = combine([f(xi) for f, xi in zip(local, inputs, strict=True)], plan, weights)
    (out * case["grad_out"][mine].to(device)).sum().backward()
    off_rank = sum(plan.send_splits) - plan.send_splits[rank]
    return {
        "out": out.detach().cpu(),
        "grad_tokens": x.grad.cpu(),
        "grad_logits": logits.grad.cpu(),
        "grad_experts": _grads(local),
        "expert_rows": list(plan.expert_counts),
        "dropped": plan.dropped,
        "sent_bytes": sum(
            sum(r["split_bytes"]) - r["split_bytes"][rank] for r in tokens_moved
        ),  # fmt: skip
        "plan_bytes": off_rank * x.shape[1] * x.element_size(),
        "dispatch_s": dispatch_s,
    }


def ep_worker(rank, world_size, cases=()):
    """One rank of expert parallelism, for each case: forward, backward, what moved.

    Args:
        cases: dicts from :func:`make_case` whose ``tokens_per_rank`` has
            ``world_size`` entries.

    Returns:
        A list, one dict per case: this rank's ``out``, ``grad_tokens`` and
        ``grad_logits`` (its tokens' rows), ``grad_experts`` (its experts'),
        ``expert_rows`` (copies each local expert got), ``dropped`` (copies it
        dropped), ``sent_bytes`` (bytes it sent to other ranks in the dispatch,
        counted below ``torch.distributed`` from the all-to-all's own input
        splits: ``cl.core.counting.count_collectives``),
        ``plan_bytes`` (the same from the dispatch's plan) and ``dispatch_s``
        (seconds the dispatch took).
    """
    return [_run_case(rank, world_size, case) for case in cases]


def compare(results: list, case: dict, atol: float = 1e-5) -> dict:
    """Largest differences between the ranks' results and one process.

    Args:
        results: what ``launch(ep_worker, ...)`` returned for this case, per rank.
        case: the case.

    Returns:
        A dict of the largest absolute differences: ``out``, ``grad_tokens``,
        ``grad_logits``, ``grad_experts``, and ``ok`` (all within ``atol``).
    """
    with one_thread():
        ref = ep_reference(case)
    world = len(results)
    diff = {}
    for key in ("out", "grad_tokens", "grad_logits"):
        got = torch.cat([r[key] for r in results])
        diff[key] = float((got - ref[key]).abs().max()) if got.numel() else 0.0
    worst = 0.0
    for rank, r in enumerate(results):
        for mine, e in zip(
            r["grad_experts"], expert_slice(case["n_experts"], rank, world), strict=True
        ):
            for g, g_ref in zip(mine, ref["grad_experts"][e], strict=True):
                worst = max(worst, float((g - g_ref).abs().max()))
    diff["grad_experts"] = worst
    diff["ok"] = all(v <= atol for v in diff.values())
    return diff


def _main() -> None:  # pragma: no cover - run under torchrun
    import os

    from clusterlab.core.backend import choose_backend

    world_size = int(os.environ["WORLD_SIZE"])
    rank = int(os.environ["RANK"])
    dist.init_process_group(choose_backend(world_size))
    try:
        sizes = [3 + 2 * r for r in range(world_size)]
        case = make_case(sizes, 2 * world_size, 2, seed=1)
        mine = ep_worker(rank, world_size, [case])[0]
        ref = ep_reference(case)
        start = sum(sizes[:rank])
        same = torch.allclose(mine["out"], ref["out"][start : start + sizes[rank]])
        print(
            f"rank {rank}: {sizes[rank]} tokens, output equals one process: {same}; "
            f"sent {mine['sent_bytes']} bytes to other ranks"
        )
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":  # pragma: no cover
    _main()


__all__ = ["ep_reference", "ep_worker", "make_case"]
