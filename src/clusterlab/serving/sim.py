"""A SimPy twin of the engine's scheduler: continuous against static batching.

Requests arrive at Poisson times; the server runs one step at a time, and a step
of ``b`` running requests takes ``step_s(b) = fixed_s + per_request_s x b``
(fitted from the engine's own decoding steps). Each step gives every running
request one token (the first step of a request is its prefill). Continuous
batching admits waiting requests at every step, up to ``max_batch``; static
batching admits only when the running batch has emptied.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import simpy

from clusterlab.core.validate import check_choice, check_float, check_int

POLICIES = ("continuous", "static")


@dataclass(frozen=True)
class Workload:
    """What arrives: ``n`` requests at ``rate_per_s``, each wanting ``new_tokens``."""

    n: int = 24
    rate_per_s: float = 20.0
    new_tokens: int = 8
    seed: int = 0

    def arrivals_s(self) -> np.ndarray:
        """Arrival times: cumulative exponential gaps of mean ``1 / rate_per_s``."""
        n = check_int("n", self.n, 1, 100_000)
        rate = check_float("rate_per_s", self.rate_per_s, 0.0, 1e6, low_inclusive=False)
        rng = np.random.default_rng(self.seed)
        return np.cumsum(rng.exponential(1.0 / rate, n))


def simulate(
    workload: Workload,
    policy: str,
    fixed_s: float,
    per_request_s: float,
    max_batch: int = 8,
) -> pd.DataFrame:
    """Serve ``workload`` under ``policy``; one row per request.

    Args:
        workload: the arrivals and the tokens each request wants.
        policy: ``"continuous"`` or ``"static"``.
        fixed_s, per_request_s: the step's cost, ``fixed_s + per_request_s x b``.
        max_batch: requests running at once, in [1, 4096].

    Returns:
        DataFrame ``request, arrival_s, first_token_s, done_s, ttft_s, tpot_s``.
    """
    check_choice("policy", policy, POLICIES)
    fixed_s = check_float("fixed_s", fixed_s, 0.0, 10.0)
    per_request_s = check_float("per_request_s", per_request_s, 0.0, 10.0)
    max_batch = check_int("max_batch", max_batch, 1, 4096)
    tokens = check_int("new_tokens", workload.new_tokens, 1, 100_000)
    arrivals = workload.arrivals_s()
    env = simpy.Environment()
    waiting: list[int] = []
    left = {i: tokens for i in range(len(arrivals))}
    first, done = {}, {}
    wake = [env.event()]

    def arrive():
        for i, t in enumerate(arrivals):
            yield env.timeout(t - env.now)
            waiting.append(i)
            if not wake[0].triggered:
                wake[0].succeed()

    def server():
        running: list[int] = []
        while len(done) < len(arrivals):
            if policy == "continuous" or not running:
                while waiting and len(running) < max_batch:
                    running.append(waiting.pop(0))
            if not running:
                wake[0] = env.event()
                yield wake[0]
                continue
            yield env.timeout(fixed_s + per_request_s * len(running))
            for i in list(running):
                first.setdefault(i, env.now)
                left[i] -= 1
                if left[i] == 0:
                    done[i] = env.now
                    running.remove(i)

    env.process(arrive())
    env.process(server())
    env.run()
    rows = [
        (i, arrivals[i], first[i], done[i]) for i in range(len(arrivals))
    ]  # fmt: skip
    df = pd.DataFrame(rows, columns=["request", "arrival_s", "first_token_s", "done_s"])
    df["ttft_s"] = df.first_token_s - df.arrival_s
    df["tpot_s"] = (df.done_s - df.first_token_s) / max(tokens - 1, 1)
    return df


def summarise(df: pd.DataFrame) -> dict:
    """Mean time to first token, mean time per output token, requests per second."""
    span = df.done_s.max() - df.arrival_s.min()
    return {
        "ttft_s": float(df.ttft_s.mean()),
        "tpot_s": float(df.tpot_s.mean()),
        "requests_per_s": float(len(df) / span),
    }


__all__ = ["POLICIES", "Workload", "simulate", "summarise"]
