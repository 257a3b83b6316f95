"""The serving labs' checks: the decode roofline against a step, tensor-parallel
decoding and disaggregated prefill against one process; the exercises."""

from __future__ import annotations

import math

import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.checks import not_attempted, passed

#: A measured speed may sit above its roof by timing noise, never by more.
ROOF_SLACK = 1.15
#: The speed-up from the smallest to the largest batch must match the model's
#: within this factor (both ways); a memory-only or a compute-only model of
#: decoding misses it by far more on this machine (the tests feed both in).
SHAPE_FACTOR = 2.0


def decode_roofline_agrees(table: pd.DataFrame) -> tuple[bool, str]:
    """Does the roofline bound a decoding step and predict how speed grows with batch?

    Two tests, each able to fail: no measured speed above its roof (x1.15), and
    the measured speed-up from the smallest batch to the largest within a
    factor of 2 of the roofline's.

    Args:
        table: ``cl.serving.measure.roofline_table`` rows.

    Returns:
        (ok, a sentence with the figures).
    """
    check_columns(table, ["batch", "tokens_per_s", "roofline_tokens_per_s"])
    t = table.sort_values("batch")
    over = t[t.tokens_per_s > ROOF_SLACK * t.roofline_tokens_per_s]
    if len(over):
        b = int(over.batch.iloc[0])
        share = float(over.tokens_per_s.iloc[0] / over.roofline_tokens_per_s.iloc[0])
        return False, (
            f"at batch {b} the step ran {share:.2f}x its roof: the model's "
            "roof is too low (bandwidth or FLOP/s), so it is not a bound"
        )
    lo, hi = t.iloc[0], t.iloc[-1]
    measured = hi.tokens_per_s / lo.tokens_per_s
    model = hi.roofline_tokens_per_s / lo.roofline_tokens_per_s
    if abs(math.log(measured / model)) > math.log(SHAPE_FACTOR):
        return False, (
            f"from batch {int(lo.batch)} to {int(hi.batch)} the measured step sped up "
            f"{measured:.1f}x and the model says {model:.1f}x: not within "
            f"{SHAPE_FACTOR:g}x"
        )
    return True, (
        f"every batch at or below its roof (best {t.tokens_per_s.max():,.0f} "
        f"tokens/s); speed-up from batch {int(lo.batch)} to {int(hi.batch)}: "
        f"{measured:.1f}x measured, {model:.1f}x on the roofline"
    )


#: How far the twin's static/continuous ratio of time to first token may sit
#: from the engine's; a twin blind to the policy (ratio 1) misses it by more.
RATIO_FACTOR = 2.0


def batching_twin_agrees(table: pd.DataFrame) -> tuple[bool, str]:
    """Does the twin predict what static batching costs in time to first token?

    At every rate the engine's ratio of mean time to first token, static over
    continuous, must lie within a factor of 2 of the twin's, and at the
    highest rate continuous batching must answer first on the engine.

    Args:
        table: ``cl.serving.measure.batching_table`` rows.
    """
    check_columns(table, ["rate_per_s", "policy", "source", "ttft_s"])
    wide = table.pivot_table(
        index=["rate_per_s", "source"], columns="policy", values="ttft_s"
    )
    ratio = (wide["static"] / wide["continuous"]).unstack("source")
    texts = []
    for rate, row in ratio.iterrows():
        off = row["engine"] / row["twin"]
        texts.append(
            f"{rate:g}/s: {row['engine']:.1f}x measured, {row['twin']:.1f}x twin"
        )
        if not 1 / RATIO_FACTOR <= off <= RATIO_FACTOR:
            return False, (
                f"at {rate:g} requests/s static batching's first tokens came "
                f"{row['engine']:.2f}x later than continuous on the engine and "
                f"{row['twin']:.2f}x in the twin: not within {RATIO_FACTOR:g}x"
            )
    top = ratio.index.max()
    if ratio.loc[top, "engine"] <= 1.0:
        return False, f"at {top:g}/s static batching answered no later: no gain"
    return True, "static over continuous, time to first token: " + "; ".join(texts)


def blocks_held(fn) -> bool:
    """Check ``fn(prompt_len, steps, block_size)`` against the engine's own count."""
    from clusterlab.serving.engine import Engine
    from clusterlab.serving.tiny import tiny_model

    try:
        fn(10, 1, 4)
    except NotImplementedError:
        return not_attempted("blocks_held")
    model = tiny_model(num_hidden_layers=1)
    cases = 0
    for block_size in (1, 4, 16):
        for prompt_len in (1, 10, 16):
            engine = Engine(model, block_size=block_size, prefix_caching=False)
            engine.add_request(list(range(1, prompt_len + 1)), max_new_tokens=40)
            for steps in range(1, 20):
                engine.step()
                want = engine.stats()["blocks_used"]
                got = fn(prompt_len, steps, block_size)
                cases += 1
                if got != want:
                    raise AssertionError(
                        f"blocks_held({prompt_len}, {steps}, {block_size}) gave "
                        f"{got}; the engine holds {want}. Count the tokens in the "
                        "cache: the newest token is not cached until the next step"
                    )
    return passed("blocks_held", f"{cases} engine states matched")


def tp_equals_one_process(ranks: list[dict], reference: dict) -> tuple[bool, str]:
    """Did every tensor-parallel rank decode one process's tokens, from a shard?

    Args:
        ranks: ``cl.serving.cluster.tp_decode`` results, one per rank.
        reference: prompt index -> the one-process greedy tokens.

    Returns:
        (ok, a sentence): every rank's tokens equal the reference for every
        prompt, and the ranks' weight shards are equal and add up to no more
        than ``1 / ranks`` each.
    """
    for r, res in enumerate(ranks):
        for i, want in reference.items():
            got = res["outputs"].get(i)
            if got != want:
                return False, (
                    f"rank {r}, prompt {i}: decoded {got}, one process "
                    f"{want}: the split is not the model (check which rows and "
                    "columns each rank keeps)"
                )
    shard = {res["shard_weight_bytes"] for res in ranks}
    if len(shard) != 1:
        return False, f"the ranks hold shards of different sizes: {sorted(shard)}"
    return True, (
        f"{len(reference)} prompts, {len(ranks)} ranks: every token equals one "
        f"process; each rank holds {shard.pop():,} bytes of layer weights and "
        f"{ranks[0]['kv_heads']} KV head(s) per layer"
    )


#: The decoding all-reduce is latency-bound if its time grows less than this
#: while its size grows at least ``LATENCY_SIZE_SPAN`` times.
LATENCY_GROWTH = 3.0
LATENCY_SIZE_SPAN = 16.0
#: A model of the all-reduce must predict each decoding size within this factor.
ALLREDUCE_FACTOR = 3.0


def allreduce_latency_bound(table: pd.DataFrame) -> tuple[bool, str]:
    """Is the decoding all-reduce latency-bound, and does the model say so?

    Args:
        table: ``cl.serving.cluster.allreduce_table`` rows, ``kind, size_bytes,
            time_s, model_time_s``; the ``decode`` rows are judged.

    Returns:
        (ok, a sentence): the measured time grew less than 3x over at least a
        16x range of decoding sizes, and the model's time is within 3x of the
        measured one at every decoding size. A model blind to latency
        (``size / bandwidth``) misses the small sizes by orders of magnitude.
    """
    check_columns(table, ["kind", "size_bytes", "time_s", "model_time_s"])
    d = table[table.kind == "decode"].sort_values("size_bytes")
    if len(d) < 2:
        return False, "need at least two decoding sizes"
    span = d.size_bytes.iloc[-1] / d.size_bytes.iloc[0]
    growth = d.time_s.iloc[-1] / d.time_s.iloc[0]
    if span < LATENCY_SIZE_SPAN:
        return False, f"the sizes span only {span:.0f}x: need {LATENCY_SIZE_SPAN:g}x"
    if growth >= LATENCY_GROWTH:
        return False, (
            f"from {d.size_bytes.iloc[0]:,.0f} to {d.size_bytes.iloc[-1]:,.0f} bytes "
            f"the all-reduce took {growth:.1f}x longer: not latency-bound"
        )
    for row in d.itertuples():
        off = row.model_time_s / row.time_s
        if not 1 / ALLREDUCE_FACTOR <= off <= ALLREDUCE_FACTOR:
            return False, (
                f"at {row.size_bytes:,.0f} bytes the model says "
                f"{row.model_time_s * 1e6:,.1f} us and the run took "
                f"{row.time_s * 1e6:,.1f} us: a model without the link's latency "
                "cannot price a decoding all-reduce"
            )
    return True, (
        f"{span:.0f}x more bytes took {growth:.2f}x the time "
        f"({d.time_s.iloc[0] * 1e6:,.0f} to {d.time_s.iloc[-1] * 1e6:,.0f} us): "
        "latency-bound, and the model is within 3x at every size"
    )


def kv_shipped_agrees(table: pd.DataFrame, kv_bytes_per_token: float):
    """Did each request ship exactly ``kv_bytes_per_token x prompt tokens``?

    Args:
        table: ``cl.serving.cluster.disagg_table`` rows (``prompt_tokens,
            kv_bytes_shipped``).
        kv_bytes_per_token: the model's bytes per token
            (``cl.models.serving.kv_bytes_per_token``).

    Returns:
        (ok, a sentence): every request's bytes equal the model's, exactly.
    """
    check_columns(table, ["prompt_tokens", "kv_bytes_shipped"])
    want = table.prompt_tokens * kv_bytes_per_token
    bad = table[table.kv_bytes_shipped != want]
    if len(bad):
        r = bad.iloc[0]
        return False, (
            f"a prompt of {int(r.prompt_tokens)} tokens shipped "
            f"{int(r.kv_bytes_shipped):,} bytes; the model says "
            f"{r.prompt_tokens * kv_bytes_per_token:,.0f}"
        )
    return True, (
        f"{len(table)} requests shipped {int(table.kv_bytes_shipped.sum()):,} bytes "
        f"in all, {kv_bytes_per_token:,.0f} bytes per prompt token, as the model says"
    )


def disagg_equals_engine(run: dict, reference: dict) -> tuple[bool, str]:
    """Did the decode rank, and one engine, both produce the reference tokens?

    Args:
        run: ``cl.serving.cluster.disagg_run``'s dict.
        reference: prompt index -> one process's greedy tokens.
    """
    for setup in ("decode", "colocated"):
        got = run[setup]["outputs"]
        for i, want in reference.items():
            if got.get(i) != want:
                return False, (
                    f"request {i}: the {setup} side produced {got.get(i)}, one "
                    f"process {want}"
                )
    return True, (
        f"{len(reference)} requests: the decode rank, fed the shipped KV cache, "
        "and one engine both produce one process's tokens"
    )


def kv_bytes_shipped(fn) -> bool:
    """Check ``fn(n_layers, n_kv_heads, head_dim, prompt_tokens, bytes_per_value)``
    against the keys and values a prefill engine really hands over."""
    import torch

    from clusterlab.serving.disagg import export_kv
    from clusterlab.serving.engine import Engine
    from clusterlab.serving.tiny import tiny_model

    try:
        fn(2, 2, 16, 10, 8)
    except NotImplementedError:
        return not_attempted("kv_bytes_shipped")
    cases = 0
    for layers, kv_heads, dtype in ((1, 2, torch.float64), (2, 1, torch.float32)):
        model = tiny_model(num_hidden_layers=layers, num_key_value_heads=kv_heads,
                           dtype=dtype)  # fmt: skip
        head_dim = model.config.hidden_size // model.config.num_attention_heads
        size = torch.empty(0, dtype=dtype).element_size()
        for n in (1, 7, 33):
            engine = Engine(model, block_size=16)
            rid = engine.add_request(list(range(1, n + 1)), max_new_tokens=4)
            engine.step()
            k, v = export_kv(engine, rid)
            want = k.numel() * k.element_size() + v.numel() * v.element_size()
            got = fn(layers, kv_heads, head_dim, n, size)
            cases += 1
            if got != want:
                raise AssertionError(
                    f"kv_bytes_shipped({layers}, {kv_heads}, {head_dim}, {n}, "
                    f"{size}) gave {got}; the prefill engine hands over {want} "
                    "bytes. Count keys and values, every layer, every prompt token"
                )
    return passed("kv_bytes_shipped", f"{cases} prefills matched")


__all__ = [
    "allreduce_latency_bound",
    "batching_twin_agrees",
    "blocks_held",
    "decode_roofline_agrees",
    "disagg_equals_engine",
    "kv_bytes_shipped",
    "kv_shipped_agrees",
    "tp_equals_one_process",
]
