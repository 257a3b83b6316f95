"""An open-loop load generator: the ``openai`` client against the book's server.

Requests leave at Poisson times whether or not earlier ones have been answered
(open loop: a real service's users do not wait for each other), each streamed,
so the client sees its first token arrive. The server reports the time of its
own decoding steps in ``GET /health``; the scheduler's twin, run with a step
cost fitted from them, predicts what the client should see.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import selectors
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd

from clusterlab.core.validate import check_float, check_int
from clusterlab.serving.measure import slow_share

START_TIMEOUT_S = 90.0

#: A request sent this late after its arrival time found the client's own
#: machine busy (its thread was not woken on time).
LATE_S = 0.005


@contextlib.contextmanager
def serve(
    *, block_size: int = 16, max_batch_requests: int = 8, timeout_s=START_TIMEOUT_S
):
    """Run ``python -m clusterlab.serving.server`` (the tiny model) on loopback.

    Yields the base URL (``http://127.0.0.1:PORT/v1``); on leaving, the server
    gets SIGTERM (and SIGKILL after 10 s), so nothing is left listening.
    """
    block_size = check_int("block_size", block_size, 1, 1024)
    max_batch_requests = check_int("max_batch_requests", max_batch_requests, 1, 4096)
    timeout_s = check_float("timeout_s", timeout_s, 1.0, 600.0)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), HF_HUB_OFFLINE="1")
    args = ["--host", "127.0.0.1", "--port", "0", "--block-size", str(block_size)]
    args += ["--max-batch-requests", str(max_batch_requests)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "clusterlab.serving.server", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        line = proc.stdout.readline() if sel.select(timeout=timeout_s) else ""
        if " on " not in line:
            proc.kill()
            err = proc.communicate(timeout=10)[1]
            raise RuntimeError(
                f"the server did not start within {timeout_s:g} s: {err[-2000:]}"
            )
        yield line.split(" on ", 1)[1].strip()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for pipe in (proc.stdout, proc.stderr):
            pipe.close()


def open_loop(base_url: str, workload, *, timeout_s: float = 60.0) -> pd.DataFrame:
    """Send ``workload``'s requests at their arrival times; one row per request.

    Args:
        base_url: the server's ``/v1`` URL.
        workload: ``cl.serving.sim.Workload`` (arrivals and tokens per request).
        timeout_s: the longest any request may take, in [1, 600].

    Returns:
        DataFrame as ``cl.serving.sim.simulate`` returns it, seen by the client
        (``arrival_s`` is when the request was sent), and ``late_s``: how late
        its thread woke to send it.
    """
    from openai import OpenAI

    timeout_s = check_float("timeout_s", timeout_s, 1.0, 600.0)
    tokens = check_int("new_tokens", workload.new_tokens, 1, 4096)
    arrivals = workload.arrivals_s()
    client = OpenAI(base_url=base_url, api_key="none", max_retries=0, timeout=timeout_s)
    start = time.perf_counter() + 0.05

    def one(i: int) -> tuple:
        time.sleep(max(0.0, start + arrivals[i] - time.perf_counter()))
        sent = time.perf_counter() - start
        stream = client.completions.create(
            model="tiny",
            prompt=f"request {i:03d}",
            max_tokens=tokens,
            temperature=0,
            stream=True,
        )
        first = None
        for _ in stream:
            first = first if first is not None else time.perf_counter() - start
        return i, sent, first, time.perf_counter() - start, sent - arrivals[i]

    with concurrent.futures.ThreadPoolExecutor(max_workers=len(arrivals)) as pool:
        rows = sorted(pool.map(one, range(len(arrivals))))
    columns = ["request", "arrival_s", "first_token_s", "done_s", "late_s"]
    df = pd.DataFrame(rows, columns=columns)
    df["ttft_s"] = df.first_token_s - df.arrival_s
    df["tpot_s"] = (df.done_s - df.first_token_s) / max(tokens - 1, 1)
    return df


def server_steps(base_url: str) -> pd.DataFrame:
    """The server's decoding steps so far: ``batch, step_s`` (from ``/health``).

    The server keeps its latest 2048 steps; the lab's runs stay below that.
    """
    import httpx

    health = httpx.get(base_url.removesuffix("/v1") + "/health", timeout=10).json()
    return pd.DataFrame(health["steps"], columns=["batch", "step_s"])


def fit_step_cost(steps: pd.DataFrame) -> dict:
    """``fixed_s + per_request_s x batch`` through the median step at each batch."""
    if steps.empty:
        raise ValueError("steps is empty: the server timed no step")
    by = steps.groupby("batch").step_s
    med, count = by.median(), by.size()
    if len(med) < 2:
        return {"fixed_s": float(med.iloc[0]), "per_request_s": 0.0}
    # a batch size seen often weighs more than one seen in a step or two
    x, w = med.index.to_numpy(float), np.sqrt(count.to_numpy(float))
    per, fixed = np.polyfit(x, med.to_numpy(), 1, w=w)
    return {"fixed_s": float(max(fixed, 0.0)), "per_request_s": float(max(per, 0.0))}


def client_table(
    rates=(20.0, 200.0, 600.0), n: int = 32, seed: int = 0
) -> pd.DataFrame:
    """The server under open-loop load at each rate, beside the twin's prediction.

    The server is warmed up first. The twin runs continuous batching with one
    step cost, fitted from the steps the server timed during all the rates' runs,
    plus the client's own overhead (HTTP, JSON, threads): the median time the
    first token of a request sent alone takes beyond one step.

    Returns:
        DataFrame ``rate_per_s, source ("client" or "twin"), ttft_s, tpot_s,
        requests_per_s, slow_share`` (client rows: the larger of the share of the
        server's steps a busy machine slowed and the share of requests sent late).
    """
    from clusterlab.serving.sim import Workload, simulate, summarise

    n = check_int("n", n, 2, 512)
    rows = []
    with serve(max_batch_requests=8) as url:
        open_loop(url, Workload(n=4, rate_per_s=50.0, new_tokens=8, seed=seed))
        before = len(server_steps(url))
        alone = open_loop(url, Workload(n=6, rate_per_s=10.0, new_tokens=4, seed=seed))
        one = fit_step_cost(server_steps(url).iloc[before:])
        step_alone = one["fixed_s"] + one["per_request_s"]
        overhead = max(0.0, float(alone.ttft_s.median()) - step_alone)
        seen, late, spans, before = {}, {}, {}, len(server_steps(url))
        for rate in rates:
            w = Workload(n=n, rate_per_s=float(rate), new_tokens=8, seed=seed)
            first = len(server_steps(url))
            run = open_loop(url, w)
            seen[rate] = summarise(run)
            late[rate] = float((run.late_s > LATE_S).mean())
            spans[rate] = (first - before, len(server_steps(url)) - before)
        # one step cost for every rate: the low rates time the small batches,
        # the high ones the full batch
        steps = server_steps(url).iloc[before:]
        cost = fit_step_cost(steps)
    for rate in rates:
        w = Workload(n=n, rate_per_s=float(rate), new_tokens=8, seed=seed)
        twin = summarise(simulate(w, "continuous", max_batch=8, **cost))
        twin["ttft_s"] += overhead
        mine = steps.iloc[slice(*spans[rate])]
        slow = slow_share(list(mine.itertuples(index=False)), **cost)
        seen[rate]["slow_share"] = max(slow, late[rate])
        rows.append(dict(rate_per_s=rate, source="client", **seen[rate]))
        rows.append(dict(rate_per_s=rate, source="twin", **twin))
    return pd.DataFrame(rows)


__all__ = ["client_table", "fit_step_cost", "open_loop", "serve", "server_steps"]
