"""Decoding speed against the batch, measured on the engine, beside the roofline."""

from __future__ import annotations

import contextlib
import time
from collections import Counter

import numpy as np
import pandas as pd

from clusterlab.core.validate import check_float, check_int


def decode_model(seed: int = 0, dtype: str = "float32"):
    """The lab's decode model: the tiny Llama widened until its weights dominate.

    About 12 M parameters (48 MB in float32): big enough that reading the
    weights is a real cost, small enough to decode 64 requests in seconds.
    """
    import torch

    from clusterlab.serving.tiny import tiny_model

    return tiny_model(
        seed=seed,
        dtype=getattr(torch, dtype),
        hidden_size=512,
        intermediate_size=1536,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=2,
    )


def mixed_requests(n: int = 12, shared: int = 20, seed: int = 0, vocab: int = 256):
    """A mixed workload: ``n`` prompts of 3-29 tokens, every third after a prefix.

    Args:
        n: prompts, in [1, 1000].
        shared: tokens of the prefix every third prompt starts with, in [0, 512].
        seed: seeds the draw.
        vocab: token ids are drawn from [1, vocab).

    Returns:
        (prompts, arrival order): a list of token-id lists, and a shuffled
        list of their indices, the order they reach the engine.
    """
    import random

    n = check_int("n", n, 1, 1000)
    shared = check_int("shared", shared, 0, 512)
    rng = random.Random(seed)
    prefix = [rng.randrange(1, vocab) for _ in range(shared)]
    prompts = [
        (prefix if i % 3 == 0 else [])
        + [rng.randrange(1, vocab) for _ in range(rng.randrange(3, 30))]
        for i in range(n)
    ]
    order = list(range(n))
    rng.shuffle(order)
    return prompts, order


def block_tables(block_size: int = 4) -> pd.DataFrame:
    """Run three requests on the engine; return each one's block table.

    Requests A and B start with the same 8 tokens (two full blocks at block
    size 4), so B finds them in the prefix cache; C shares nothing. The run is
    stopped after a few steps, with every request still running.

    Returns:
        DataFrame ``request, position, block, tokens, shared`` (``position``:
        the index in the request's table; ``block``: the physical block;
        ``tokens``: how many of its slots hold cached tokens).
    """
    from clusterlab.serving.engine import Engine
    from clusterlab.serving.tiny import tiny_model

    engine = Engine(tiny_model(num_hidden_layers=1), block_size=block_size)
    common = [11, 12, 13, 14, 15, 16, 17, 18]
    engine.add_request(common + [21, 22], max_new_tokens=20, request_id="A")
    engine.step()  # A's blocks are named in the prefix cache once computed
    engine.add_request(common + [31, 32, 33], max_new_tokens=20, request_id="B")
    engine.add_request([41, 42, 43, 44, 45], max_new_tokens=20, request_id="C")
    for _ in range(3):
        engine.step()
    owners = Counter(b for r in engine.running for b in r.blocks)
    rows = []
    for r in sorted(engine.running, key=lambda r: r.request_id):
        for i, b in enumerate(r.blocks):
            held = min(block_size, max(0, r.computed - i * block_size))
            rows.append((r.request_id, i, b, held, owners[b] > 1))
    cols = ["request", "position", "block", "tokens", "shared"]
    return pd.DataFrame(rows, columns=cols)


def serve_workload(model, workload, policy: str, max_batch: int = 8) -> pd.DataFrame:
    """Serve ``workload`` on the real engine, on the wall clock; one row per request.

    The engine runs on one thread (:func:`one_thread`): with two, every step
    waits at barriers between the threads, and a program busy on one core made
    each step about seventy times slower (one thread: under twice).

    Requests are added when their arrival time has passed (open loop: arrivals
    do not wait for replies). Continuous batching adds them at every step, up
    to ``max_batch`` running; static batching adds them only once the running
    batch has finished.

    Args:
        model: a ``transformers`` Llama.
        workload: ``cl.serving.sim.Workload``.
        policy: ``"continuous"`` or ``"static"``.
        max_batch: requests running at once, in [1, 4096].

    Returns:
        DataFrame as ``cl.serving.sim.simulate`` returns it, measured.
    """
    from clusterlab.core.validate import check_choice

    check_choice("policy", policy, ("continuous", "static"))
    max_batch = check_int("max_batch", max_batch, 1, 4096)
    with one_thread():
        return _serve(model, workload, policy, max_batch)


def _serve(model, workload, policy: str, max_batch: int) -> pd.DataFrame:
    from clusterlab.serving.engine import Engine

    arrivals = workload.arrivals_s()
    engine = Engine(model, block_size=16, max_batch_requests=max_batch)
    vocab = model.config.vocab_size
    start, nxt, first, done, steps = time.perf_counter(), 0, {}, {}, []
    while len(done) < len(arrivals):
        now = time.perf_counter() - start
        if policy == "continuous" or not engine.has_unfinished():
            while nxt < len(arrivals) and arrivals[nxt] <= now:
                prompt = [(5 * nxt + j + 1) % vocab for j in range(4)]
                engine.add_request(prompt, workload.new_tokens, request_id=str(nxt))
                nxt += 1
        if not engine.has_unfinished():
            time.sleep(max(0.0, min(arrivals[nxt] - now, 0.01)))
            continue
        began = time.perf_counter() - start
        produced = engine.step()
        t = time.perf_counter() - start
        steps.append((len(produced), t - began))
        for rid, _ in produced:
            first.setdefault(int(rid), t)
        for rid in engine.pop_finished():
            done[int(rid)] = t
    rows = [(i, arrivals[i], first[i], done[i]) for i in range(len(arrivals))]
    df = pd.DataFrame(rows, columns=["request", "arrival_s", "first_token_s", "done_s"])
    df["ttft_s"] = df.first_token_s - df.arrival_s
    df["tpot_s"] = (df.done_s - df.first_token_s) / max(workload.new_tokens - 1, 1)
    df.attrs["steps"] = steps  # (requests given a token, seconds) per step
    return df


def static_over_continuous(table: pd.DataFrame, source: str = "engine") -> float:
    """Static over continuous mean time to first token at the highest rate."""
    rows = table[table.source == source]
    top = rows[rows.rate_per_s == rows.rate_per_s.max()].set_index("policy")
    return float(top.at["static", "ttft_s"] / top.at["continuous", "ttft_s"])


def batch_trace(policy: str = "continuous", n: int = 8, max_batch: int = 4, seed=0):
    """Who is in the running batch at each engine step, from a real run.

    ``n`` requests of 3 to 9 new tokens arrive at random steps (0 to 11) and
    are served by the engine with at most ``max_batch`` running: continuous
    batching admits a waiting request at every step, static batching only once
    the running batch has emptied.

    Args:
        policy: ``"continuous"`` or ``"static"``.
        n: requests, in [1, 64].
        max_batch: requests running at once, in [1, 64].
        seed: draws the arrivals and lengths.

    Returns:
        DataFrame ``policy, request, step, phase``: one row per request and step
        from its arrival to its last token; ``phase`` is ``"waiting"`` (arrived,
        no token yet), ``"prefill"`` (its first token) or ``"decode"``.
    """
    from clusterlab.core.validate import check_choice
    from clusterlab.serving.engine import Engine
    from clusterlab.serving.tiny import tiny_model

    check_choice("policy", policy, ("continuous", "static"))
    n, max_batch = check_int("n", n, 1, 64), check_int("max_batch", max_batch, 1, 64)
    rng = np.random.default_rng(check_int("seed", seed, 0))
    arrive = np.sort(rng.integers(0, 12, n))
    lengths = rng.integers(3, 10, n)
    engine = Engine(
        tiny_model(num_hidden_layers=1),
        block_size=4,
        max_batch_requests=max_batch,
        prefix_caching=False,
    )
    tokens: dict[int, list[int]] = {i: [] for i in range(n)}
    step, nxt, finished = 0, 0, 0
    while finished < n:
        if policy == "continuous" or not engine.has_unfinished():
            while nxt < n and arrive[nxt] <= step:
                prompt = [(7 * nxt + j) % 250 + 1 for j in range(5)]
                engine.add_request(prompt, int(lengths[nxt]), request_id=str(nxt))
                nxt += 1
        if engine.has_unfinished():
            for rid, _ in engine.step():
                tokens[int(rid)].append(step)
            finished += len(engine.pop_finished())
        step += 1
    rows = []
    for i in range(n):
        first = tokens[i][0]
        rows += [(policy, i, t, "waiting") for t in range(int(arrive[i]), first)]
        rows += [
            (policy, i, t, "prefill" if t == first else "decode") for t in tokens[i]
        ]
    return pd.DataFrame(rows, columns=["policy", "request", "step", "phase"])


#: The real small model the serving lab runs where the hub is reachable (Colab).
HUB_MODEL = "HuggingFaceTB/SmolLM2-135M"


def hub_demo(model_id: str = HUB_MODEL, prompt: str = "The capital of France is",
             max_new_tokens: int = 16) -> dict:  # fmt: skip
    """Serve a real ``transformers`` model through the book's engine, if it loads.

    The model (a Llama-architecture causal LM from the Hugging Face hub, or a
    local path) runs in float32 through ``cl.serving.engine.Engine``; its
    greedy tokens are compared with ``model.generate``.

    Returns:
        dict ``ok`` (loaded and run), ``why`` (when not: the hub unreachable,
        or the model not a Llama), ``text``, ``same_as_generate``, ``tokens_per_s``.
    """
    import torch

    from clusterlab.serving.engine import Engine
    from clusterlab.serving.server import load

    max_new_tokens = check_int("max_new_tokens", max_new_tokens, 1, 512)
    try:
        model, tok, name = load(model_id, "float32")
    except Exception as exc:  # offline, no such model, no permission
        return {
            "ok": False,
            "why": f"{model_id} could not be loaded ({type(exc).__name__}: "
            f"{str(exc)[:160]}); the tiny model stands in",
        }
    ids = tok.encode(prompt)
    try:
        engine = Engine(model, block_size=16)
    except ValueError as exc:
        return {"ok": False, "why": f"{name} cannot run in the book's engine: {exc}"}
    t0 = time.perf_counter()
    engine.add_request(ids, max_new_tokens, request_id="demo")
    out = engine.run_until_done()["demo"]
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        ref = model.generate(
            torch.tensor([ids]), max_new_tokens=max_new_tokens, do_sample=False
        )[0, len(ids) :].tolist()
    detok = tok.detokenizer()
    text = "".join(detok.push(t) for t in out) + detok.flush()
    return {
        "ok": True,
        "model": name,
        "text": prompt + text,
        "same_as_generate": out == ref[: len(out)],
        "tokens_per_s": len(out) / seconds,
    }


#: A step this many times its fitted cost was slowed by something else.
SLOW_STEP = 3.0


def slow_share(steps, fixed_s: float, per_request_s: float) -> float:
    """The share of ``(batch, step_s)`` steps over :data:`SLOW_STEP` x their cost.

    Noise on a shared machine only adds time, and a step of the engine has no
    reason of its own to take three times another of its size: a run with many
    such steps was measured on a busy machine.
    """
    if not steps:
        return 0.0
    cost = [fixed_s + per_request_s * max(b, 1) for b, _ in steps]
    slow = [s > SLOW_STEP * c for (_, s), c in zip(steps, cost, strict=True)]
    return float(np.mean(slow))


def batching_table(
    model, rates=(20.0, 60.0, 150.0), n: int = 24, seed: int = 0, repeats: int = 3
):
    """Continuous against static batching at each arrival rate: twin and engine.

    The twin (``cl.serving.sim``) runs with the step cost fitted from this
    engine's own decoding steps; the engine serves the same arrival times
    ``repeats`` times under each policy, the two policies taking turns, and each
    engine figure is the median over those runs: one run that another program
    stalls for a few hundred milliseconds then moves no figure.

    Args:
        model: a ``transformers`` Llama.
        rates: arrival rates in requests/s, each in (0, 10000].
        n: requests per run, in [2, 4096].
        seed: the arrival times' seed.
        repeats: engine runs per policy and rate, in [1, 15].

    Returns:
        DataFrame ``rate_per_s, policy, source, ttft_s, tpot_s, requests_per_s,
        slow_share`` (engine rows: the share of its steps a busy machine slowed).
    """
    from clusterlab.serving.sim import Workload, simulate, summarise

    n = check_int("n", n, 2, 4096)
    repeats = check_int("repeats", repeats, 1, 15)
    rates = [check_float("rates", r, 0.0, 1e4, low_inclusive=False) for r in rates]
    cost = step_cost(model)
    policies = ("continuous", "static")
    rows = []
    for rate in rates:
        w = Workload(n=n, rate_per_s=float(rate), new_tokens=8, seed=seed)
        runs = {p: [] for p in policies}
        for _ in range(repeats):
            for policy in policies:
                run = serve_workload(model, w, policy, max_batch=8)
                runs[policy].append(
                    summarise(run)
                    | {"slow_share": slow_share(run.attrs["steps"], **cost)}
                )
        for policy in policies:
            twin = summarise(simulate(w, policy, max_batch=8, **cost))
            real = pd.DataFrame(runs[policy]).median().to_dict()
            rows.append(dict(rate_per_s=rate, policy=policy, source="twin", **twin))
            rows.append(dict(rate_per_s=rate, policy=policy, source="engine", **real))
    return pd.DataFrame(rows)


def step_cost(model, batches=(1, 8)) -> dict:
    """The engine's step cost, ``fixed_s + per_request_s x batch``, from two batches.

    Returns:
        dict ``fixed_s, per_request_s`` (a line through the median steps).
    """
    run = measure_decode(model, batches, new_tokens=8)
    (b0, s0), (b1, s1) = run[["batch", "step_s"]].iloc[[0, -1]].to_numpy()
    per = max(0.0, (s1 - s0) / (b1 - b0))
    return {"fixed_s": float(max(0.0, s0 - per * b0)), "per_request_s": float(per)}


def model_costs(model) -> dict:
    """What one decoding step costs the roofline: weight bytes and FLOPs per token.

    Returns:
        dict ``params, weight_bytes, flops_per_token, bytes_per_weight``. The
        embedding table is left out of both: a step reads only one of its rows
        per request.
    """
    embed = model.get_input_embeddings().weight
    params = sum(p.numel() for p in model.parameters() if p is not embed)
    size = embed.element_size()
    return {
        "params": int(params),
        "weight_bytes": float(params * size),
        "flops_per_token": 2.0 * params,
        "bytes_per_weight": float(size),
    }


def measure_decode(
    model, batches=(1, 4, 16), new_tokens: int = 16, prompt_len: int = 4
) -> pd.DataFrame:
    """Decode ``batch`` requests together on the engine, on one thread; time the
    decoding steps.

    The first step (prefill and the first token) is not timed; every later step
    decodes one token of every request.

    Args:
        model: a ``transformers`` Llama (``decode_model()``).
        batches: batch sizes, each in [1, 256].
        new_tokens: tokens per request, in [2, 512].
        prompt_len: prompt tokens per request, in [1, 64].

    Returns:
        DataFrame ``batch, steps, step_s, tokens_per_s`` (``step_s``: the
        median decoding step).
    """

    new_tokens = check_int("new_tokens", new_tokens, 2, 512)
    prompt_len = check_int("prompt_len", prompt_len, 1, 64)
    batches = [check_int(f"batches[{i}]", b, 1, 256) for i, b in enumerate(batches)]
    with one_thread():  # as the roofs are measured, and a busy core stalls no barrier
        return _decode_steps(model, batches, new_tokens, prompt_len)


def _decode_steps(model, batches, new_tokens: int, prompt_len: int) -> pd.DataFrame:
    from clusterlab.serving.engine import Engine

    vocab = model.config.vocab_size
    rows = []
    for b in batches:
        engine = Engine(model, block_size=16)
        for r in range(b):
            prompt = [(7 * r + j + 1) % vocab for j in range(prompt_len)]
            engine.add_request(prompt, max_new_tokens=new_tokens)
        engine.step()
        times = []
        while engine.has_unfinished():
            t0 = time.perf_counter()
            engine.step()
            times.append(time.perf_counter() - t0)
        step_s = float(pd.Series(times).median())
        rows.append((b, len(times), step_s, b / step_s))
    return pd.DataFrame(rows, columns=["batch", "steps", "step_s", "tokens_per_s"])


@contextlib.contextmanager
def one_thread():
    """Run torch on one thread for the block (the roofline's timings use it).

    Both roofs and the decoding step are then measured on one core: a program
    busy on the machine's other core slows neither, and the model and the
    measurement see the same machine.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def measure_decode_step(model, batches=(1, 4, 16, 64)) -> pd.DataFrame:
    """Time a decoding step's matrix multiplies alone, on one core: every weight
    read once.

    One step of ``batch`` requests multiplies a ``batch``-row activation by
    every linear layer's weight (attention projections, MLP, output head);
    attention over the cache and the engine's bookkeeping are left out, so
    this is the part of decoding the roofline describes.

    Args:
        model: a ``transformers`` Llama (``decode_model()``).
        batches: batch sizes, each in [1, 4096].

    Returns:
        DataFrame ``batch, step_s, tokens_per_s`` (the fastest of 7 steps).
    """
    import torch

    weights = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
    with one_thread():
        return _time_steps(weights, batches)


def _time_steps(weights, batches) -> pd.DataFrame:
    import torch

    rows = []
    for i, b in enumerate(batches):
        b = check_int(f"batches[{i}]", b, 1, 4096)
        dtype = weights[0].dtype
        xs = {w.shape[1]: torch.randn(b, w.shape[1], dtype=dtype) for w in weights}
        times = []
        with torch.no_grad():
            for _ in range(8):
                t0 = time.perf_counter()
                for w in weights:
                    torch.nn.functional.linear(xs[w.shape[1]], w)
                times.append(time.perf_counter() - t0)
        step_s = min(times[1:])
        rows.append((b, step_s, b / step_s))
    return pd.DataFrame(rows, columns=["batch", "step_s", "tokens_per_s"])


def measure_machine(rows: int = 64, dtype: str = "float32") -> dict:
    """This machine's two roofs, measured on one core: bandwidth and matmul FLOP/s.

    The matmul is timed at the decode step's own shape at the largest batch
    (``rows`` rows through a 512-to-1536 layer): the best its GEMMs can do.

    Args:
        rows: the batch of the timed matmul, in [1, 4096].
    """
    import torch

    from clusterlab.roofline.measure import _best_time, measure_stream_bandwidth

    rows = check_int("rows", rows, 1, 4096)
    with one_thread():
        bw = measure_stream_bandwidth(sizes_bytes=(2**26,), repeats=7)
        bw = bw["bw_Bps"].iloc[0]
        a = torch.randn(rows, 512, dtype=getattr(torch, dtype))
        w = torch.randn(512, 1536, dtype=getattr(torch, dtype))
        flop = 2.0 * rows * 512 * 1536
        t = _best_time(lambda: a @ w, torch.device("cpu"), 5, 20)
    return {"bandwidth_Bps": float(bw) / 2.0, "peak_flops": flop / t}


def roofline_table(measured: pd.DataFrame, costs: dict, machine: dict) -> pd.DataFrame:
    """The measured rows with the roofline's prediction and its bound beside them.

    ``bandwidth_Bps`` in ``machine`` is the read bandwidth (a copy's bytes moved
    over two): a decoding step reads its weights and writes almost nothing.
    """
    from clusterlab.models.serving import decode_step_s

    roof = {
        "weight_bytes": costs["weight_bytes"],
        "flops_per_token": costs["flops_per_token"],
        "bandwidth_Bps": machine["bandwidth_Bps"],
        "peak_flops": machine["peak_flops"],
    }
    out = measured.copy()
    out["roofline_step_s"] = [decode_step_s(int(b), **roof) for b in out["batch"]]
    out["roofline_tokens_per_s"] = out["batch"] / out["roofline_step_s"]
    memory_s = roof["weight_bytes"] / roof["bandwidth_Bps"]
    compute_s = out["batch"] * roof["flops_per_token"] / roof["peak_flops"]
    out["bound"] = ["compute" if c > memory_s else "memory" for c in compute_s]
    out["share_of_roof"] = out["tokens_per_s"] / out["roofline_tokens_per_s"]
    return out


__all__ = [
    "HUB_MODEL",
    "batch_trace",
    "batching_table",
    "block_tables",
    "decode_model",
    "hub_demo",
    "measure_decode",
    "measure_decode_step",
    "measure_machine",
    "mixed_requests",
    "model_costs",
    "one_thread",
    "roofline_table",
    "serve_workload",
    "slow_share",
    "static_over_continuous",
    "step_cost",
]
