"""The serving lab's checks: the decode roofline against a step; the exercise."""

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

#: How far the client's first-token wait may sit from the twin's: wider than
#: RATIO_FACTOR, since the twin models the server's queue and not the client's
#: own threads; a server model without a queue misses the top rate by ~10x.
CLIENT_FACTOR = 3.0

#: The least cost of static batching the engine must show, as the geometric mean
#: over the rates of its first-token ratio, static over continuous.
STATIC_GAIN = 1.25

#: A run with more than this share of slowed steps was measured on a busy
#: machine: a miss there is "busy" (measure again), not the model's fault.
BUSY_SHARE = 0.1


def _busy_or_miss(table: pd.DataFrame, text: str):
    """``("busy", text)`` when the run shows a busy machine, else ``(False, text)``."""
    if "slow_share" in table and table["slow_share"].max() > BUSY_SHARE:
        share = table["slow_share"].max()
        return "busy", (
            f"{text}; but {share:.0%} of one run's steps took over three times "
            "the step's cost: something else had the cores"
        )
    return False, text


def batching_twin_agrees(table: pd.DataFrame) -> tuple[bool, str]:
    """Does the twin predict what static batching costs in time to first token?

    At every rate the engine's ratio of mean time to first token, static over
    continuous, must lie within a factor of 2 of the twin's, and over the rates,
    measured on the engine, static batching's first tokens must come at least
    :data:`STATIC_GAIN` times later (geometric mean of the ratios: a rate where a
    loaded machine saturated both policies alike does not decide it alone). A
    miss in a run whose steps show a busy machine is ``"busy"``
    (``cl.core.busy.retry`` measures again).

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
            return _busy_or_miss(
                table,
                f"at {rate:g} requests/s static batching's first tokens came "
                f"{row['engine']:.2f}x later than continuous on the engine and "
                f"{row['twin']:.2f}x in the twin: not within {RATIO_FACTOR:g}x",
            )
    gain = math.exp(sum(math.log(r) for r in ratio["engine"]) / len(ratio))
    if not gain >= STATIC_GAIN:
        return _busy_or_miss(
            table,
            f"over the rates static batching's first tokens came only {gain:.2f}x "
            f"later than continuous on the engine (at least {STATIC_GAIN:g}x "
            "expected): the policies barely differ",
        )
    return True, "static over continuous, time to first token: " + "; ".join(texts)


def client_twin_agrees(table: pd.DataFrame) -> tuple[bool, str]:
    """Does the twin predict what the ``openai`` client waits for its first token?

    At every rate the client's mean time to first token must lie within a factor
    of 3 of the twin's, and at the highest rate it must be at least twice the
    lowest rate's (the server saturates: a model without queueing fails). A
    miss in a run whose steps show a busy machine is ``"busy"``.

    Args:
        table: ``cl.serving.load.client_table`` rows.
    """
    check_columns(table, ["rate_per_s", "source", "ttft_s"])
    wide = table.pivot_table(index="rate_per_s", columns="source", values="ttft_s")
    texts = []
    for rate, row in wide.iterrows():
        off = row["client"] / row["twin"]
        texts.append(
            f"{rate:g}/s: {row['client'] * 1e3:.1f} ms seen, "
            f"{row['twin'] * 1e3:.1f} ms twin"
        )
        if not 1 / CLIENT_FACTOR <= off <= CLIENT_FACTOR:
            return _busy_or_miss(
                table,
                f"at {rate:g} requests/s the client waited "
                f"{row['client'] * 1e3:.1f} ms for a first token and the twin "
                f"predicted {row['twin'] * 1e3:.1f} ms: not within {CLIENT_FACTOR:g}x",
            )
    rise = wide["client"].iloc[-1] / wide["client"].iloc[0]
    if rise < 2.0:
        return _busy_or_miss(
            table,
            f"the first token came only {rise:.1f}x later at the highest rate than "
            "at the lowest: the load never saturated the server",
        )
    return True, "time to first token: " + "; ".join(texts)


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


__all__ = [
    "batching_twin_agrees",
    "blocks_held",
    "client_twin_agrees",
    "decode_roofline_agrees",
]
