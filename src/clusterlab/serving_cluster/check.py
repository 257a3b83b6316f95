"""The serving-on-a-cluster lab's checks: tensor-parallel decoding and
disaggregated prefill against one process, the decoding all-reduce against its
model, the bytes shipped against theirs; the exercise."""

from __future__ import annotations

import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.checks import not_attempted, passed


def tp_equals_one_process(ranks: list[dict], reference: dict) -> tuple[bool, str]:
    """Did every tensor-parallel rank decode one process's tokens, from a shard?

    Args:
        ranks: ``cl.serving_cluster.measure.tp_decode`` results, one per rank.
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
        table: ``cl.serving_cluster.measure.allreduce_table`` rows, ``kind, size_bytes,
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
        table: ``cl.serving_cluster.measure.disagg_table`` rows (``prompt_tokens,
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
        run: ``cl.serving_cluster.measure.disagg_run``'s dict.
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

    from clusterlab.serving.engine import Engine
    from clusterlab.serving.tiny import tiny_model
    from clusterlab.serving_cluster.disagg import export_kv

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
    "disagg_equals_engine",
    "kv_bytes_shipped",
    "kv_shipped_agrees",
    "tp_equals_one_process",
]
