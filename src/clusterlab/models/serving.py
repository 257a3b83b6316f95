"""Serving one model: what its KV cache holds, and how fast decoding can go.

Two closed forms, each checked against a measurement in the serving lab:

- the KV cache per token: ``2 x layers x KV heads x head dim x bytes`` (keys
  and values of every layer; grouped-query attention shrinks the KV heads), or,
  for multi-head latent attention, ``layers x latent width x bytes``;
- the decode roofline: one decoding step reads every weight once, whatever the
  batch, and each request's KV cache; it does ``2 x parameters`` FLOPs per
  token. So a step takes ``max(bytes read / bandwidth, FLOPs / peak)``, and
  tokens per second grow with the batch until the compute roof is reached, at
  the ridge batch ``peak x bytes per weight / (2 x bandwidth)``.
"""

from __future__ import annotations

import math

import pandas as pd

from clusterlab.core import published
from clusterlab.core.validate import check_float, check_int


def kv_bytes_per_token(
    n_layers: int,
    n_kv_heads: int | None = None,
    head_dim: int | None = None,
    *,
    kv_latent_dim: int | None = None,
    bytes_per_value: float = 2,
) -> float:
    """Bytes of KV cache one token adds to one sequence.

    Args:
        n_layers: transformer layers, in [1, 1000].
        n_kv_heads: key/value heads (grouped-query attention), in [1, 1024].
        head_dim: one head's width, in [1, 4096].
        kv_latent_dim: instead of heads, the width of a latent cache (DeepSeek's
            multi-head latent attention caches one vector per token and layer).
        bytes_per_value: 2 for bf16, 1 for fp8, 8 for float64, in (0, 16].

    Returns:
        bytes per token.
    """
    layers = check_int("n_layers", n_layers, 1, 1000)
    b = check_float("bytes_per_value", bytes_per_value, 0.0, 16.0, low_inclusive=False)
    if kv_latent_dim is not None:
        return layers * check_int("kv_latent_dim", kv_latent_dim, 1, 1 << 16) * b
    if n_kv_heads is None or head_dim is None:
        raise ValueError(
            "n_kv_heads and head_dim are needed unless kv_latent_dim is given "
            f"(got n_kv_heads={n_kv_heads!r}, head_dim={head_dim!r})"
        )
    heads = check_int("n_kv_heads", n_kv_heads, 1, 1024)
    return 2.0 * layers * heads * check_int("head_dim", head_dim, 1, 4096) * b


def kv_cache_table(
    gpu: str = "H200 SXM", n_gpus: int = 8, bytes_per_value: float = 2
) -> pd.DataFrame:
    """Each published model's KV bytes per token and the tokens a server holds.

    The weights (``params_total x bytes_per_value``) are spread over ``n_gpus``
    GPUs of ``gpu``; what is left of their memory holds KV cache.

    Args:
        gpu: a ``part`` of ``data/gpu_specs.csv``.
        n_gpus: GPUs holding one copy of the model, in [1, 1024].
        bytes_per_value: bytes per weight and per cached value, in (0, 16].

    Returns:
        DataFrame ``model, kv_bytes_per_token, mha_bytes_per_token,
        weights_bytes, free_bytes, tokens_held`` (``mha``: the same model
        with as many KV heads as attention heads; nan for a latent cache;
        ``tokens_held`` is 0 where the weights do not fit).
    """
    n = check_int("n_gpus", n_gpus, 1, 1024)
    hbm = float(published.value("gpu_specs", "hbm_bytes", part=gpu)) * n
    rows = []
    for _, m in published.load("serving_models").iterrows():
        latent = None if pd.isna(m["kv_latent_dim"]) else int(m["kv_latent_dim"])
        heads = None if pd.isna(m["n_kv_heads"]) else int(m["n_kv_heads"])
        dim = None if pd.isna(m["head_dim"]) else int(m["head_dim"])
        kv = kv_bytes_per_token(
            int(m["n_layers"]), heads, dim, kv_latent_dim=latent,
            bytes_per_value=bytes_per_value,
        )  # fmt: skip
        mha = (
            math.nan
            if latent is not None
            else kv_bytes_per_token(
                int(m["n_layers"]), int(m["n_heads"]), dim,
                bytes_per_value=bytes_per_value,
            )
        )  # fmt: skip
        weights = float(m["params_total"]) * bytes_per_value
        free = max(0.0, hbm - weights)
        rows.append((m["model"], kv, mha, weights, free, math.floor(free / kv)))
    cols = ["model", "kv_bytes_per_token", "mha_bytes_per_token", "weights_bytes"]
    return pd.DataFrame(rows, columns=cols + ["free_bytes", "tokens_held"])


def decode_step_s(
    batch: int,
    weight_bytes: float,
    flops_per_token: float,
    bandwidth_Bps: float,
    peak_flops: float,
    kv_bytes_per_request: float = 0.0,
) -> float:
    """The roofline's time for one decoding step of ``batch`` requests.

    Args:
        batch: requests decoded together, in [1, 1_000_000].
        weight_bytes: bytes of weights read once per step (> 0).
        flops_per_token: FLOPs per generated token, about 2 x parameters (> 0).
        bandwidth_Bps: memory bandwidth (> 0).
        peak_flops: the compute roof (> 0).
        kv_bytes_per_request: KV cache each request reads per step (>= 0).

    Returns:
        seconds: ``max(bytes / bandwidth, batch x flops_per_token / peak)``.
    """
    b = check_int("batch", batch, 1, 1_000_000)
    for name, v in (
        ("weight_bytes", weight_bytes),
        ("flops_per_token", flops_per_token),
        ("bandwidth_Bps", bandwidth_Bps),
        ("peak_flops", peak_flops),
    ):
        check_float(name, v, 0.0, math.inf, low_inclusive=False)
    kv = check_float("kv_bytes_per_request", kv_bytes_per_request, 0.0, math.inf)
    memory_s = (weight_bytes + b * kv) / bandwidth_Bps
    compute_s = b * flops_per_token / peak_flops
    return max(memory_s, compute_s)


def decode_tokens_per_s(batch: int, **roofline) -> float:
    """Tokens per second of the roofline at ``batch`` (see :func:`decode_step_s`)."""
    return batch / decode_step_s(batch, **roofline)


def ridge_batch(
    peak_flops: float, bandwidth_Bps: float, bytes_per_weight: float
) -> float:
    """The batch at which decoding turns from memory-bound to compute-bound.

    Each weight (``bytes_per_weight`` bytes) is read once per step and used for
    2 FLOPs per request, so the step's intensity is ``2 x batch /
    bytes_per_weight`` FLOP per byte; it meets the ridge ``peak / bandwidth``
    at ``batch = peak x bytes_per_weight / (2 x bandwidth)`` (KV reads ignored).
    """
    check_float("peak_flops", peak_flops, 0.0, math.inf, low_inclusive=False)
    check_float("bandwidth_Bps", bandwidth_Bps, 0.0, math.inf, low_inclusive=False)
    check_float("bytes_per_weight", bytes_per_weight, 0.0, 16.0, low_inclusive=False)
    return peak_flops * bytes_per_weight / (2.0 * bandwidth_Bps)


def tp_allreduce_bytes(hidden: int, tokens: int, bytes_per_value: float = 2) -> float:
    """Bytes of one tensor-parallel all-reduce: a step's activations, ``tokens x
    hidden x bytes per value`` (each rank's partial sum of the layer's output).

    Args:
        hidden: the model's width, in [1, 1 << 20].
        tokens: tokens in the step (the batch, when decoding), in [1, 1 << 24].
        bytes_per_value: in (0, 16].
    """
    h = check_int("hidden", hidden, 1, 1 << 20)
    t = check_int("tokens", tokens, 1, 1 << 24)
    b = check_float("bytes_per_value", bytes_per_value, 0.0, 16.0, low_inclusive=False)
    return float(h * t * b)


def tp_comm_per_step_s(
    hidden: int,
    batch: int,
    n_layers: int,
    tp: int,
    link,
    bytes_per_value: float = 2,
    algorithm: str = "tree",
) -> dict:
    """What tensor parallelism's all-reduces add to one decoding step.

    Two all-reduces per layer (after attention, after the MLP), each of
    :func:`tp_allreduce_bytes` over ``tp`` ranks, priced by the alpha-beta
    model on ``link`` (small messages take the latency-optimal tree).

    Args:
        hidden, batch, n_layers: the model's width, the requests decoded
            together, its layers (>= 1).
        tp: ranks in the tensor-parallel group, in [1, 1024].
        link: a ``cl.models.links.Link`` or the name of one.
        bytes_per_value: in (0, 16].
        algorithm: ``"tree"`` or ``"ring"``.

    Returns:
        dict ``nbytes`` (one all-reduce), ``allreduce_s``, ``latency_s`` (the
        part of it the link's latency makes), ``step_s`` (all of a step's).
    """
    from clusterlab.models.collectives import allreduce_time
    from clusterlab.models.links import as_link

    lk = as_link(link)
    layers = check_int("n_layers", n_layers, 1, 1000)
    n = check_int("tp", tp, 1, 1024)
    nbytes = tp_allreduce_bytes(hidden, batch, bytes_per_value)
    t = allreduce_time(nbytes, n, lk.alpha_s, lk.effective_Bps, algorithm)
    latency = allreduce_time(0.0, n, lk.alpha_s, lk.effective_Bps, algorithm)
    return {
        "nbytes": nbytes,
        "allreduce_s": float(t),
        "latency_s": float(latency),
        "step_s": 2.0 * layers * float(t),
    }


def kv_transfer_s(prompt_tokens: int, kv_bytes_per_token: float, link) -> float:
    """Seconds to ship one prompt's KV cache over ``link``: ``alpha + bytes / bw``.

    Args:
        prompt_tokens: the prompt's length, in [1, 1 << 24].
        kv_bytes_per_token: :func:`kv_bytes_per_token` (> 0).
        link: a ``cl.models.links.Link`` or the name of one.
    """
    from clusterlab.models.collectives import alpha_beta_time
    from clusterlab.models.links import as_link

    lk = as_link(link)
    n = check_int("prompt_tokens", prompt_tokens, 1, 1 << 24)
    kv = check_float("kv_bytes_per_token", kv_bytes_per_token, 0.0, math.inf,
                     low_inclusive=False)  # fmt: skip
    return alpha_beta_time(n * kv, lk.alpha_s, lk.effective_Bps)


def disagg_latency(
    prompt_tokens: int,
    rate_per_s: float,
    prefill_s_per_token: float,
    decode_step_s: float,
    kv_bytes_per_token: float,
    link,
) -> dict:
    """Time to first token and between tokens, co-located against disaggregated.

    Co-located, an engine spends a share ``rho = rate x prompt x prefill time
    per token`` of its time on prefills, and its decoding steps wait for them:
    a token every ``decode_step / (1 - rho)``. Disaggregated, the decode
    processes only decode (a token every ``decode_step``) and each request's
    first token waits for its KV cache to cross the link as well. The model
    leaves out queueing and assumes the prefill side keeps up (``rho < 1``).

    Args:
        prompt_tokens: tokens per prompt, >= 1.
        rate_per_s: requests arriving per second per engine, >= 0.
        prefill_s_per_token: seconds of prefill per prompt token (> 0).
        decode_step_s: seconds per decoding step of the running batch (> 0).
        kv_bytes_per_token: :func:`kv_bytes_per_token` (> 0).
        link: between the prefill and decode processes (``cl.models.links``).

    Returns:
        dict ``prefill_share`` (rho), ``itl_colocated_s`` (inf once rho >= 1),
        ``itl_disagg_s``, ``ttft_colocated_s``, ``ttft_disagg_s``,
        ``transfer_s``.
    """
    rate = check_float("rate_per_s", rate_per_s, 0.0, 1e9)
    per_tok = check_float("prefill_s_per_token", prefill_s_per_token, 0.0, 1e3,
                          low_inclusive=False)  # fmt: skip
    step = check_float("decode_step_s", decode_step_s, 0.0, 1e3, low_inclusive=False)
    transfer = kv_transfer_s(prompt_tokens, kv_bytes_per_token, link)
    prefill = prompt_tokens * per_tok
    rho = rate * prefill
    return {
        "prefill_share": rho,
        "itl_colocated_s": step / (1.0 - rho) if rho < 1.0 else math.inf,
        "itl_disagg_s": step,
        "ttft_colocated_s": prefill,
        "ttft_disagg_s": prefill + transfer,
        "transfer_s": transfer,
    }


#: The dearest machine-hour the cost model accepts, in dollars (a sanity range).
_MAX_HOURLY = 1e5


def cost_per_million_tokens(tokens_per_s: float, price_per_hour: float) -> float:
    """Dollars per million generated tokens of a machine kept busy.

    Args:
        tokens_per_s: tokens it generates per second (> 0).
        price_per_hour: what an hour of it costs, in dollars (> 0).
    """
    rate = check_float("tokens_per_s", tokens_per_s, 0.0, math.inf,
                       low_inclusive=False)  # fmt: skip
    price = check_float("price_per_hour", price_per_hour, 0.0, _MAX_HOURLY,
                        low_inclusive=False)  # fmt: skip
    return price / (3600.0 * rate) * 1e6


def serving_cost(
    target_s_per_token: float,
    *,
    weight_bytes: float,
    flops_per_token: float,
    bandwidth_Bps: float,
    peak_flops: float,
    price_per_hour: float,
    kv_bytes_per_request: float = 0.0,
    memory_bytes: float | None = None,
    max_batch: int = 4096,
) -> dict:
    """The cost per million tokens of a machine at a latency target.

    A request sees a token every decoding step, so the target caps the step:
    the largest batch whose roofline step (:func:`decode_step_s`) meets it,
    and whose KV cache fits beside the weights in ``memory_bytes``, sets the
    tokens per second the machine sells for its price.

    Args:
        target_s_per_token: the longest step a request accepts (> 0 s).
        weight_bytes, flops_per_token, bandwidth_Bps, peak_flops,
            kv_bytes_per_request: the roofline's inputs (:func:`decode_step_s`).
        price_per_hour: dollars per hour of the machine (> 0).
        memory_bytes: its memory for weights and KV cache (None: no limit).
        max_batch: the largest batch tried, in [1, 1_000_000].

    Returns:
        dict ``batch`` (0 if not even one request meets the target),
        ``step_s``, ``tokens_per_s``, ``usd_per_million`` (inf at batch 0).
    """
    target = check_float("target_s_per_token", target_s_per_token, 0.0, 1e4,
                         low_inclusive=False)  # fmt: skip
    most = check_int("max_batch", max_batch, 1, 1_000_000)
    roof = dict(weight_bytes=weight_bytes, flops_per_token=flops_per_token,
                bandwidth_Bps=bandwidth_Bps, peak_flops=peak_flops,
                kv_bytes_per_request=kv_bytes_per_request)  # fmt: skip
    if memory_bytes is not None:
        mem = check_float("memory_bytes", memory_bytes, 0.0, math.inf)
        room = (mem - weight_bytes) / max(kv_bytes_per_request, 1e-300)
        most = min(most, int(max(0.0, room)))
    # The step grows with the batch: the largest batch under the target.
    lo, hi = 0, most
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if decode_step_s(mid, **roof) <= target:
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        return {"batch": 0, "step_s": math.inf, "tokens_per_s": 0.0,
                "usd_per_million": math.inf}  # fmt: skip
    step = decode_step_s(lo, **roof)
    return {
        "batch": lo,
        "step_s": step,
        "tokens_per_s": lo / step,
        "usd_per_million": cost_per_million_tokens(lo / step, price_per_hour),
    }


#: Cores of the priced CPU machine (``cpu_node_32core_hyperstack``: 32 cores).
CPU_NODE_CORES = 32


def serving_machines() -> dict:
    """The two priced machines of the cost comparison, read from ``data/``.

    One H100 SXM5 (its datasheet roofs, the reference on-demand cloud price)
    and one 32-core cloud CPU machine (the assumed per-core roofs of
    ``data/cpu_core.csv`` times its cores, its on-demand price; its memory is
    not a limit at the batches its roofs allow).

    Returns:
        dict name -> ``peak_flops, bandwidth_Bps, memory_bytes,
        price_per_hour``.
    """
    from clusterlab.models.economics import cloud_price

    gpu = published.row("gpu_specs", part="H100 SXM5")
    core = published.row("cpu_core", item="server_core_assumed")
    return {
        "H100 SXM5 (cloud)": dict(
            peak_flops=float(gpu["bf16_dense_flops"]),
            bandwidth_Bps=float(gpu["hbm_bandwidth_Bps"]),
            memory_bytes=float(gpu["hbm_bytes"]),
            price_per_hour=cloud_price(),
        ),
        "32-core CPU (cloud)": dict(
            peak_flops=float(core["peak_flops"]) * CPU_NODE_CORES,
            bandwidth_Bps=float(core["bandwidth_Bps"]) * CPU_NODE_CORES,
            memory_bytes=None,  # its 64 GB hold any batch its roofs allow
            price_per_hour=published.value(
                "prices", "usd", item="cpu_node_32core_hyperstack"
            ),
        ),
    }


def serving_cost_table(
    model: str = "Llama 3 8B",
    targets_s=(0.02, 0.05, 0.2, 1.0),
    context_tokens: int = 2048,
    bytes_per_value: float = 2,
) -> pd.DataFrame:
    """The cost per million tokens of a published model, on a GPU and a CPU.

    Args:
        model: a ``model`` of ``data/serving_models.csv``.
        targets_s: latency targets, seconds per token.
        context_tokens: tokens of KV cache each request holds, >= 1.
        bytes_per_value: bytes per weight and cached value, in (0, 16].

    Returns:
        DataFrame ``machine, target_s, batch, step_s, tokens_per_s,
        usd_per_million``.
    """
    m = published.row("serving_models", model=model)
    ctx = check_int("context_tokens", context_tokens, 1, 1 << 24)
    kv = kv_bytes_per_token(
        int(m["n_layers"]),
        int(m["n_kv_heads"]),
        int(m["head_dim"]),
        bytes_per_value=bytes_per_value,
    )
    weights = float(m["params_total"]) * bytes_per_value  # fmt: skip
    rows = []
    for name, mach in serving_machines().items():
        for target in targets_s:
            r = serving_cost(
                target, weight_bytes=weights,
                flops_per_token=2.0 * float(m["params_total"]),
                kv_bytes_per_request=kv * ctx, **mach,
            )  # fmt: skip
            rows.append(dict(machine=name, target_s=float(target), **r))
    return pd.DataFrame(rows)


def disagg_sweep(
    model: str = "Llama 3 70B",
    gpu: str = "H100 SXM5",
    n_gpus: int = 8,
    batch: int = 32,
    context_tokens: int = 4096,
    rates_per_s=None,
    links=("NVLink 4", "NDR400 InfiniBand", "100GbE TCP"),
) -> pd.DataFrame:
    """Inputs of the "when does disaggregation pay" explorer, per rate and link.

    One server of ``n_gpus`` GPUs holds the model. A prefill runs at the
    book's MFU on all of them (``2 x parameters`` FLOPs per prompt token); a
    decoding step of ``batch`` requests of ``context_tokens`` is the roofline's
    (:func:`decode_step_s`); the KV cache crosses ``link`` at its latency and
    effective bandwidth (:func:`kv_transfer_s`). The prompt's length is left
    to the explorer: every time here is per prompt token, or fixed.

    Returns:
        DataFrame ``rate_per_s, link, prefill_s_per_token, transfer_alpha_s,
        transfer_s_per_token, decode_step_s`` (rates: 0.05/s up, x1.5 a row,
        unless ``rates_per_s`` is given).
    """
    from clusterlab.models.interconnects import default_mfu
    from clusterlab.models.links import as_link

    m = published.row("serving_models", model=model)
    spec = published.row("gpu_specs", part=gpu)
    n = check_int("n_gpus", n_gpus, 1, 1024)
    params = float(m["params_total"])
    kv = kv_bytes_per_token(int(m["n_layers"]), int(m["n_kv_heads"]),
                            int(m["head_dim"]))  # fmt: skip
    per_token = 2.0 * params / (float(spec["bf16_dense_flops"]) * n * default_mfu())
    step = decode_step_s(
        batch, weight_bytes=2.0 * params, flops_per_token=2.0 * params,
        bandwidth_Bps=float(spec["hbm_bandwidth_Bps"]) * n,
        peak_flops=float(spec["bf16_dense_flops"]) * n,
        kv_bytes_per_request=kv * context_tokens,
    )  # fmt: skip
    if rates_per_s is None:
        rates_per_s = [round(0.05 * 1.5**i, 4) for i in range(18)]
    rows = []
    for name in links:
        lk = as_link(name)
        for rate in rates_per_s:
            r = check_float("rates_per_s", rate, 0.0, 1e6, low_inclusive=False)
            rows.append((r, name, per_token, lk.alpha_s, kv / lk.effective_Bps, step))
    cols = ["rate_per_s", "link", "prefill_s_per_token", "transfer_alpha_s"]
    return pd.DataFrame(rows, columns=cols + ["transfer_s_per_token", "decode_step_s"])


__all__ = [
    "cost_per_million_tokens",
    "disagg_sweep",
    "disagg_latency",
    "kv_transfer_s",
    "serving_cost",
    "serving_cost_table",
    "serving_machines",
    "tp_allreduce_bytes",
    "tp_comm_per_step_s",
    "decode_step_s",
    "decode_tokens_per_s",
    "kv_bytes_per_token",
    "kv_cache_table",
    "ridge_batch",
]
