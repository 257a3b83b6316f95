"""Serving on a cluster, measured: tensor-parallel decoding, the all-reduce per
token, and disaggregated prefill against one engine, on real process groups.

Each function launches its ranks with ``cl.launch`` (gloo on CPUs, NCCL with a
GPU per rank) and returns tidy rows for the checks and charts.
"""

from __future__ import annotations

import statistics

import pandas as pd

from clusterlab.core.validate import check_int

#: The tiny Llama of the cluster runs, float64 unless a run says otherwise:
#: wide enough that a prompt's prefill is a real cost beside a decoding step.
CLUSTER_MODEL = dict(
    hidden_size=256,
    intermediate_size=688,
    num_hidden_layers=4,
    num_attention_heads=8,
    num_key_value_heads=2,
)


def prompts_of(n: int, low: int, high: int, seed: int = 0) -> list[list[int]]:
    """``n`` prompts of random bytes, each of ``low`` to ``high`` tokens.

    Args:
        n: prompts, in [1, 1000].
        low, high: lengths, 1 <= low <= high <= 4096.
        seed: seeds the draw.
    """
    import random

    n = check_int("n", n, 1, 1000)
    low = check_int("low", low, 1, 4096)
    high = check_int("high", high, low, 4096)
    rng = random.Random(seed)
    return [
        [rng.randrange(1, 256) for _ in range(rng.randint(low, high))] for _ in range(n)
    ]


def check_prompts(prompts) -> list[list[int]]:
    """``prompts`` as lists of token ids, or a ValueError saying what is wrong.

    Args:
        prompts: 1 to 1000 non-empty lists of ids in [0, 255] (the tiny model's
            byte vocabulary).
    """
    out = [list(p) for p in prompts] if isinstance(prompts, (list, tuple)) else None
    if not out or len(out) > 1000:
        n = len(out) if out is not None else type(prompts).__name__
        raise ValueError(f"prompts={n}: give a list of 1 to 1000 prompts")
    for i, p in enumerate(out):
        if not p or not all(isinstance(t, int) and 0 <= t < 256 for t in p):
            raise ValueError(
                f"prompts[{i}]={p[:8]!r}: each prompt is a non-empty list of token "
                "ids in [0, 255]"
            )
    return out


def reference_outputs(prompts, new_tokens: int, seed: int = 0, model_kw=None):
    """Greedy tokens of one process: ``transformers``' ``generate``, per prompt."""
    import torch

    from clusterlab.serving.tiny import tiny_model

    model = tiny_model(seed=seed, **(model_kw or {}))
    out = {}
    for i, p in enumerate(prompts):
        ids = model.generate(torch.tensor([p]), max_new_tokens=new_tokens,
                             do_sample=False)  # fmt: skip
        out[i] = ids[0, len(p) :].tolist()
    return out


def tp_decode(prompts, new_tokens: int = 8, world_size: int = 2, seed: int = 0,
              model_kw=None, timeout: float = 60.0) -> list[dict]:  # fmt: skip
    """Decode ``prompts`` on ``world_size`` tensor-parallel ranks; their results.

    Returns:
        ``cl.serving_cluster.ranks.tp_decode_worker``'s dict, one per rank.
    """
    from clusterlab.core.launcher import launch
    from clusterlab.serving_cluster.ranks import tp_decode_worker

    world_size = check_int("world_size", world_size, 1, 8)
    prompts = check_prompts(prompts)
    return launch(tp_decode_worker, world_size, timeout=timeout, prompts=prompts,
                  new_tokens=new_tokens, seed=seed, model_kw=model_kw)  # fmt: skip


def comm_table(rank_result: dict) -> pd.DataFrame:
    """One rank's all-reduces during decoding, one row per decoding step.

    Returns:
        DataFrame ``tokens, bytes, allreduces, time_s, per_allreduce_s``: steps
        with the same tokens grouped (``time_s``: median seconds of a step's
        all-reduces in total).
    """
    log = pd.DataFrame(rank_result["comm"])
    layers = log.layer.max() + 1
    log["step"] = log.index // (2 * layers)
    per_step = log.groupby("step").agg(
        tokens=("tokens", "first"), bytes=("bytes", "first"),
        allreduces=("bytes", "size"), time_s=("time_s", "sum"),
    )  # fmt: skip
    out = per_step.groupby(["tokens", "bytes", "allreduces"], as_index=False).agg(
        time_s=("time_s", "median"), steps=("time_s", "size")
    )
    out["per_allreduce_s"] = out.time_s / out.allreduces
    return out


def allreduce_table(hidden: int, batches=(1, 4, 16, 64), large=(2**20, 2**22),
                    world_size: int = 2, repeats: int = 20,
                    bytes_per_value: int = 8) -> pd.DataFrame:  # fmt: skip
    """Time the decoding all-reduce at each batch, and two large messages.

    A decoding step of ``batch`` requests all-reduces ``hidden x batch x
    bytes`` per layer twice; the large messages show where bandwidth starts to
    matter. An alpha-beta line is fitted through every size.

    Returns:
        DataFrame ``batch, size_bytes, time_s, median_s, model_time_s, kind``
        (``kind``: "decode" or "large"; ``batch`` 0 for the large ones), with
        ``alpha_s`` and ``beta_Bps`` of the fit in ``.attrs``.
    """
    from clusterlab.core.alpha_beta import fit_alpha_beta
    from clusterlab.core.launcher import launch
    from clusterlab.models.serving import tp_allreduce_bytes
    from clusterlab.serving_cluster.ranks import allreduce_sweep_worker

    sizes = [tp_allreduce_bytes(hidden, b, bytes_per_value) for b in batches]
    sizes += [float(s) for s in large]
    res = launch(allreduce_sweep_worker, world_size, timeout=60.0,
                 sizes_bytes=sizes, repeats=repeats)[0]  # fmt: skip
    df = pd.DataFrame(res, columns=["size_bytes", "time_s", "median_s"])
    df.insert(0, "batch", list(batches) + [0] * len(large))
    df["kind"] = ["decode"] * len(batches) + ["large"] * len(large)
    alpha, beta = fit_alpha_beta(df.size_bytes, df.time_s)
    df["model_time_s"] = alpha + df.size_bytes / beta
    df.attrs.update(alpha_s=float(alpha), beta_Bps=float(beta))
    return df


def disagg_run(prompts, new_tokens: int = 16, seed: int = 0, model_kw=None,
               timeout: float = 60.0) -> dict:  # fmt: skip
    """The same requests disaggregated (two ranks) and on one engine (one rank).

    Returns:
        dict ``prefill`` and ``decode`` (the two ranks' results of
        ``cl.serving_cluster.disagg.disagg_worker``) and ``colocated``.
    """
    from clusterlab.core.launcher import launch
    from clusterlab.serving_cluster.disagg import colocated_worker, disagg_worker

    prompts = check_prompts(prompts)
    check_int("new_tokens", new_tokens, 1, 1024)
    kw = dict(prompts=prompts, new_tokens=new_tokens, seed=seed,
              model_kw=CLUSTER_MODEL if model_kw is None else model_kw)  # fmt: skip
    prefill, decode = launch(disagg_worker, 2, timeout=timeout, **kw)
    (colocated,) = launch(colocated_worker, 1, timeout=timeout, **kw)
    return {"prefill": prefill, "decode": decode, "colocated": colocated}


def _latency(times: list[float]) -> tuple[float, float]:
    itl = (times[-1] - times[0]) / max(len(times) - 1, 1)
    return times[0], itl


def disagg_table(run: dict, prompts) -> pd.DataFrame:
    """Per request: its prompt, the KV bytes shipped, and both setups' latencies.

    Returns:
        DataFrame ``request, prompt_tokens, kv_bytes_shipped, prefill_s,
        ttft_disagg_s, itl_disagg_s, ttft_colocated_s, itl_colocated_s``
        (times from the moment every request arrived).
    """
    rows = []
    for i, p in enumerate(prompts):
        ttft_d, itl_d = _latency(run["decode"]["token_times"][i])
        ttft_c, itl_c = _latency(run["colocated"]["token_times"][i])
        rows.append(dict(
            request=i, prompt_tokens=len(p),
            kv_bytes_shipped=run["prefill"]["kv_bytes"][i],
            prefill_s=run["prefill"]["prefill"][i]["prefill_s"],
            ttft_disagg_s=ttft_d, itl_disagg_s=itl_d,
            ttft_colocated_s=ttft_c, itl_colocated_s=itl_c,
        ))  # fmt: skip
    return pd.DataFrame(rows)


def latency_summary(table: pd.DataFrame, run: dict) -> pd.DataFrame:
    """Mean time to first token and between tokens, and the median decoding step.

    Returns:
        DataFrame indexed by ``setup`` ("co-located", "disaggregated"), columns
        ``ttft_s, itl_s, decode_step_s``.
    """
    return pd.DataFrame(
        {
            "ttft_s": [table.ttft_colocated_s.mean(), table.ttft_disagg_s.mean()],
            "itl_s": [table.itl_colocated_s.mean(), table.itl_disagg_s.mean()],
            "decode_step_s": [
                statistics.median(run["colocated"]["step_s"]),
                statistics.median(run["decode"]["step_s"]),
            ],
        },
        index=pd.Index(["co-located", "disaggregated"], name="setup"),
    )


__all__ = [
    "CLUSTER_MODEL",
    "allreduce_table",
    "comm_table",
    "disagg_run",
    "disagg_table",
    "latency_summary",
    "check_prompts",
    "prompts_of",
    "reference_outputs",
    "tp_decode",
]
