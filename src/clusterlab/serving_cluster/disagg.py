"""Prefill and decode on two processes: the KV cache shipped between them.

A prompt's prefill is one long, compute-bound pass; decoding is many short,
memory-bound steps. Run on one engine, every prefill that joins a step slows
the decodes sharing it. Disaggregated serving (DistServe, Splitwise) gives each
phase its own processes: here rank 0 prefills, rank 1 decodes.

For every request the prefill rank runs the prompt through its engine, samples
the first token, reads the prompt's keys and values out of its paged cache and
sends them with ``dist.send``: first a header (the shapes, the first token),
then the prompt, then the keys and the values of every layer. The decode rank
receives them into blocks of its own cache and decodes on, with continuous
batching, polling for the next request between its steps. Its tokens equal one
engine's: the cache it received is the cache that engine would have computed.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from clusterlab.serving.engine import Engine, Request

PREFILL, DECODE = 0, 1
#: Header fields sent before a request's KV cache, as one int64 tensor.
HEADER = ("request", "layers", "tokens", "kv_heads", "head_dim", "first_token")


def export_kv(engine: Engine, request_id: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The cached keys and values of a request's computed tokens.

    Returns:
        ``(k, v)``, each of shape (layers, tokens, KV heads, head dim), gathered
        from the request's blocks in every layer's cache.
    """
    req = engine.requests[request_id]
    slots = engine._slots(req, 0, req.computed)
    k = torch.stack([cache[slots] for cache in engine.k_cache])
    v = torch.stack([cache[slots] for cache in engine.v_cache])
    return k, v


def import_request(
    engine: Engine,
    prompt: list[int],
    first_token: int,
    k: torch.Tensor,
    v: torch.Tensor,
    max_new_tokens: int,
    request_id: str,
) -> None:
    """Add a prefilled request to ``engine``: its prompt's cache and first token.

    The request joins the running batch with its blocks filled from ``k`` and
    ``v``; its next step decodes (caches the first token, samples the second).
    """
    req = Request(request_id, list(prompt), int(max_new_tokens))
    req.output = [int(first_token)]
    engine.requests[request_id] = req
    if not engine._grow(req, len(prompt)):
        del engine.requests[request_id]
        raise RuntimeError(f"no free blocks for request {request_id!r}")
    slots = engine._slots(req, 0, len(prompt))
    for layer in range(len(engine.k_cache)):
        engine.k_cache[layer][slots] = k[layer].to(engine.k_cache[layer].dtype)
        engine.v_cache[layer][slots] = v[layer].to(engine.v_cache[layer].dtype)
    req.computed = len(prompt)
    if engine.prefix_caching:
        engine._name_full_blocks(req)
    if max_new_tokens == 1 or first_token in engine.eos:
        engine.pool.release(req.blocks)
        req.blocks = []
        del engine.requests[request_id]
        engine.finished[request_id] = req.output
    else:
        engine.running.append(req)


def send_request(index: int, prompt, first_token: int, k, v, dst: int) -> int:
    """Send one prefilled request to ``dst``: header, prompt, keys, values.

    Returns:
        The bytes of keys and values sent (the header and prompt not counted).
    """
    layers, tokens, heads, dim = k.shape
    header = torch.tensor([index, layers, tokens, heads, dim, first_token])
    dist.send(header, dst)
    dist.send(torch.tensor(prompt, dtype=torch.long), dst)
    dist.send(k.contiguous(), dst)
    dist.send(v.contiguous(), dst)
    return k.numel() * k.element_size() + v.numel() * v.element_size()


def recv_rest(header: torch.Tensor, src: int, dtype: torch.dtype):
    """After ``header`` arrived: receive the prompt, the keys and the values."""
    index, layers, tokens, heads, dim, first = (int(x) for x in header)
    prompt = torch.empty(tokens, dtype=torch.long)
    dist.recv(prompt, src)
    k = torch.empty(layers, tokens, heads, dim, dtype=dtype)
    v = torch.empty_like(k)
    dist.recv(k, src)
    dist.recv(v, src)
    return index, prompt.tolist(), first, k, v


def _engine(model, prompts, **kw):
    budget = max(512, max(len(p) for p in prompts))
    return Engine(model, block_size=16, max_batch_tokens=budget, **kw)


def _prefill(engine, prompts, new_tokens, t0):
    shipped, times = [], []
    for i, p in enumerate(prompts):
        start = time.perf_counter()
        # At least two tokens asked for, so that the first step does not end
        # the request and free its blocks before they are read.
        rid = engine.add_request(list(p), max_new_tokens=max(new_tokens, 2))
        ((_, first),) = engine.step()  # the whole prompt, then its first token
        k, v = export_kv(engine, rid)
        engine.abort_request(rid)
        done = time.perf_counter()
        shipped.append(send_request(i, list(p), first, k, v, DECODE))
        sent = time.perf_counter()
        times.append(dict(request=i, prefill_s=done - start, send_s=sent - done,
                          sent_at_s=sent - t0))  # fmt: skip
    return {"kv_bytes": shipped, "prefill": times}


def _decode(engine, n_requests, new_tokens, t0):
    token_times: dict[int, list[float]] = {}
    header = torch.empty(len(HEADER), dtype=torch.long)
    work, received, steps = dist.irecv(header, PREFILL), 0, []
    while received < n_requests or engine.has_unfinished():
        if work is not None and (work.is_completed() or not engine.has_unfinished()):
            work.wait()
            i, prompt, first, k, v = recv_rest(header, PREFILL, engine.dtype)
            import_request(engine, prompt, first, k, v, new_tokens, str(i))
            token_times[i] = [time.perf_counter() - t0]
            received += 1
            work = dist.irecv(header, PREFILL) if received < n_requests else None
            continue
        a = time.perf_counter()
        produced = engine.step()
        now = time.perf_counter()
        steps.append(now - a)
        for rid, _ in produced:
            token_times[int(rid)].append(now - t0)
    out = {int(k): v for k, v in engine.pop_finished().items()}
    return {"outputs": out, "token_times": token_times, "step_s": steps}


def disagg_worker(rank, world_size, prompts, new_tokens=8, seed=0, model_kw=None):
    """Rank 0 prefills each prompt and ships its KV cache; rank 1 decodes.

    All requests arrive together at the start (after a barrier); times are
    seconds since then, on each rank's own clock (one machine, one clock).

    Returns:
        On rank 0: ``kv_bytes`` (bytes of keys and values shipped, per
        request) and ``prefill`` (per request: ``prefill_s, send_s,
        sent_at_s``). On rank 1: ``outputs`` (request -> token ids),
        ``token_times`` (request -> the time each token was known) and
        ``step_s``.
    """
    from clusterlab.serving.tiny import tiny_model

    if world_size != 2:
        raise ValueError(f"world_size={world_size}: disaggregation runs on 2 ranks")
    engine = _engine(tiny_model(seed=seed, **(model_kw or {})), prompts)
    dist.barrier()
    t0 = time.perf_counter()
    if rank == PREFILL:
        return _prefill(engine, prompts, new_tokens, t0)
    return _decode(engine, len(prompts), new_tokens, t0)


def colocated_worker(rank, world_size, prompts, new_tokens=8, seed=0, model_kw=None):
    """The same requests on one engine that prefills and decodes (one rank).

    Returns:
        ``outputs`` and ``token_times`` as the decode rank of
        :func:`disagg_worker` returns them, and ``step_s``.
    """
    from clusterlab.serving.tiny import tiny_model

    engine = _engine(tiny_model(seed=seed, **(model_kw or {})), prompts)
    t0 = time.perf_counter()
    for i, p in enumerate(prompts):
        engine.add_request(list(p), max_new_tokens=new_tokens, request_id=str(i))
    token_times: dict[int, list[float]] = {i: [] for i in range(len(prompts))}
    steps = []
    while engine.has_unfinished():
        a = time.perf_counter()
        produced = engine.step()
        now = time.perf_counter()
        steps.append(now - a)
        for rid, _ in produced:
            token_times[int(rid)].append(now - t0)
    out = {int(k): v for k, v in engine.pop_finished().items()}
    return {"outputs": out, "token_times": token_times, "step_s": steps}


__all__ = [
    "HEADER",
    "colocated_worker",
    "disagg_worker",
    "export_kv",
    "import_request",
    "recv_rest",
    "send_request",
]
